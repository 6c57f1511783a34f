"""Futures of jobs on the platform, and the ways to wait on many of them.

A ``JobFuture`` is completed by the client's result subscription when the job's result arrives. It reads
like ``concurrent.futures.Future`` (``result``, ``done``, ``exception``, ``cancel``, ``add_done_callback``)
and can be awaited. ``wait``, ``as_completed`` and ``gather`` mirror their ``concurrent.futures`` and
Dask namesakes, raise ``JobTimeout`` naming what is still pending, and show a progress bar for many jobs.

Interrupting a wait (Ctrl-C, or a notebook's interrupt) stops the waiting only: the jobs go on running
and their futures still complete; ``cancel()`` is what stops a job.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import html
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any, Final, Literal, Protocol

from gpurt.client.errors import JobCancelled, JobError, JobFailed, JobRejected, JobTimeout
from gpurt.client.progress import progress_bar
from gpurt.client.results import Result
from runtime.protocol.messages import JobResult, JobStatus

ERRORS: Final[dict[JobStatus, type[JobError]]] = {
    JobStatus.REJECTED: JobRejected, JobStatus.FAILED: JobFailed, JobStatus.CANCELLED: JobCancelled}
INTERRUPTED_NOTE: Final = ("only the wait was interrupted: the job(s) go on running; wait again, or call "
                           "cancel() to stop them")


class Canceller(Protocol):
    """What a future asks of the client that made it (``gpurt.client.Client``, which imports this module)."""

    def cancel(self, job_id: str) -> bool:
        """Ask the platform to stop ``job_id``; False if it had already finished."""
        ...


class JobFuture:
    """The eventual result of one submitted job."""

    def __init__(self, job_id: str, client: Canceller, digest: str) -> None:
        """``digest``: the ``request_digest`` of the request published for it (``JobRequest.digest``)."""
        self.job_id = job_id
        self.digest = digest
        self._client = client
        self._future: cf.Future[JobResult] = cf.Future()
        self.submitted_at = time.time()
        # The Pub/Sub message id of the request, once the broker has it (None for a future whose publish failed).
        self.message_id: str | None = None

    # --- completion (the client's subscriber threads) ----------------------------------------------

    def _complete(self, raw: JobResult) -> bool:
        """Take ``raw`` if it answers this future's own request; False (and ignored) for any other result of the
        job id: one answering another body (anyone may publish a request, valid or not, under any id) or a
        forgery, which cannot name the digest of a body it never saw."""
        if raw.request_digest != self.digest:
            return False
        # The first terminal result wins: a job retried and replayed may publish another one later.
        with contextlib.suppress(cf.InvalidStateError):
            self._future.set_result(raw)
        return True

    def _abandon(self, error: BaseException) -> None:
        with contextlib.suppress(cf.InvalidStateError):
            self._future.set_exception(error)

    # --- the concurrent.futures surface -------------------------------------------------------------

    def done(self) -> bool:
        """Whether the job's result (of any status) has arrived."""
        return self._future.done()

    def result(self, timeout: float | None = None) -> Result:
        """The job's ``Result``; raises ``JobRejected``/``JobFailed``/``JobCancelled``, or ``JobTimeout``."""
        outcome = self._wait(timeout)
        if outcome.status is not JobStatus.SUCCEEDED:
            raise ERRORS[outcome.status](outcome.raw)
        return outcome

    def exception(self, timeout: float | None = None) -> JobError | None:
        """The ``JobError`` the job ended with, or ``None`` if it succeeded; waits like ``result``."""
        outcome = self._wait(timeout)
        return None if outcome.status is JobStatus.SUCCEEDED else ERRORS[outcome.status](outcome.raw)

    def outcome(self) -> Result:
        """The arrived result whatever its status, without raising for a failed job (for tables)."""
        if not self.done():
            raise JobTimeout([self.job_id], None)
        return self._wait(0)

    def cancel(self) -> bool:
        """Ask the platform to stop the job; False if it had already finished. The result becomes ``cancelled``."""
        if self.done():
            return False
        return self._client.cancel(self.job_id)

    def cancelled(self) -> bool:
        """Whether the job ended ``cancelled``."""
        return self.done() and self._future.exception() is None and self._future.result().status is JobStatus.CANCELLED

    def add_done_callback(self, fn: Callable[[JobFuture], Any]) -> None:
        """Call ``fn(self)`` when the result arrives (at once if it has), on the thread that completes it."""
        self._future.add_done_callback(lambda _: fn(self))

    def __await__(self) -> Generator[Any, None, Result]:
        return self._async_result().__await__()

    async def _async_result(self) -> Result:
        loop = asyncio.get_running_loop()
        arrived: asyncio.Future[None] = loop.create_future()

        def wake(_: object) -> None:
            # Not asyncio.wrap_future: cancelling the awaiting task must not cancel the shared future.
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody is waiting
                loop.call_soon_threadsafe(lambda: arrived.done() or arrived.set_result(None))

        self._future.add_done_callback(wake)
        await arrived
        return self.result(timeout=0)

    # --- display -----------------------------------------------------------------------------------

    def __repr__(self) -> str:
        if not self.done():
            return f"<JobFuture {self.job_id}: pending>"
        if self._future.exception() is not None:
            return f"<JobFuture {self.job_id}: {self._future.exception()}>"
        return f"<JobFuture {self.job_id}: {self._future.result().status.value}>"

    def _repr_html_(self) -> str:
        if self.done() and self._future.exception() is None:
            return self.outcome()._repr_html_()
        return f"<p>{html.escape(repr(self))}</p>"

    # --- internals ---------------------------------------------------------------------------------

    def _wait(self, timeout: float | None) -> Result:
        try:
            return Result(self._future.result(timeout))
        except cf.TimeoutError:
            raise JobTimeout([self.job_id], timeout) from None
        except KeyboardInterrupt as exc:
            exc.add_note(f"{self.job_id}: {INTERRUPTED_NOTE}")
            raise


def wait(futures: Iterable[JobFuture], timeout: float | None = None,
         return_when: Literal["FIRST_COMPLETED", "ALL_COMPLETED"] = "ALL_COMPLETED",
         ) -> tuple[set[JobFuture], set[JobFuture]]:
    """``(done, not_done)`` after ``timeout`` seconds or when ``return_when`` holds; never raises for a job."""
    by_inner = {f._future: f for f in futures}
    try:
        done, not_done = cf.wait(by_inner, timeout, return_when)
    except KeyboardInterrupt as exc:
        exc.add_note(INTERRUPTED_NOTE)
        raise
    return {by_inner[f] for f in done}, {by_inner[f] for f in not_done}


def as_completed(futures: Iterable[JobFuture], timeout: float | None = None,
                 progress: bool | None = None) -> Iterator[JobFuture]:
    """Yield each future as its result arrives; ``JobTimeout`` names the jobs still pending at ``timeout``."""
    by_inner = {f._future: f for f in futures}
    bar = progress_bar(len(by_inner), progress, "jobs")
    pending = set(by_inner)
    try:
        for inner in cf.as_completed(by_inner, timeout):
            pending.discard(inner)
            if bar is not None:
                bar.update()
            yield by_inner[inner]
    except cf.TimeoutError:
        raise JobTimeout((by_inner[f].job_id for f in pending), timeout) from None
    except KeyboardInterrupt as exc:
        exc.add_note(INTERRUPTED_NOTE)
        raise
    finally:
        if bar is not None:
            bar.close()


def gather(futures: Iterable[JobFuture], timeout: float | None = None, return_exceptions: bool = False,
           progress: bool | None = None) -> list[Any]:
    """Every future's ``Result``, in the order given; the first job error to arrive raises unless ``return_exceptions``.

    With ``return_exceptions`` a job that did not succeed gives its ``JobError`` in its place. ``timeout``
    bounds the whole wait; ``JobTimeout`` then names every job still pending.
    """
    ordered = list(futures)
    for future in as_completed(ordered, timeout, progress):
        if not return_exceptions and (error := future.exception(timeout=0)) is not None:
            raise error  # at once, as Dask's gather does: the other jobs go on and keep their futures
    results: list[Any] = []
    for future in ordered:
        error = future.exception(timeout=0)
        if error is not None and not return_exceptions:
            raise error
        results.append(error if error is not None else future.result(timeout=0))
    return results
