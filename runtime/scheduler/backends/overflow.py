"""Overflow: a job that waits too long for a GKE GPU runs as a Vertex AI custom job instead.

Every job goes to Dask first. A job that has not begun on a Dask worker ``spill_after_s`` after its submission
(its pool at ``daskWorkersMax``, a scale-up pending on a stockout or quota, queued provisioning not granted yet)
is spilled: run on Vertex AI, with the same result contract. A one-shot timer per submission decides, never a
poll. The job can never run in both places: the worker marks its start (an event) and then checks the spill
event; the timer sets the spill event and then reads the start mark (``runtime.worker.task.claim_start``).
Whichever comes second sees the other's mark: the timer that sees the worker began leaves the job to it, and a
worker that sees the spill refuses the job (``SpillRefused``), which then runs on Vertex AI.

Job types pinned to Vertex AI (``GPURT_VERTEX_TYPES``) always run there; packs of tiny jobs and sharded jobs
stay on Dask (docs/scheduler.md, "Overflow to Vertex AI").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any

from kernels.errors import JobCancelled
from runtime.protocol.messages import JobRequest
from runtime.scheduler.backends.base import Execution, Job, Submission, outcome_of_one, placed, submission
from runtime.scheduler.backends.dask import DaskBackend
from runtime.scheduler.backends.vertex import VertexBackend
from runtime.worker.task import SpillRefused, spill_event_names

log = logging.getLogger(__name__)


class OverflowBackend:
    """Dask first; Vertex AI for pinned job types and for jobs still waiting for a worker after ``spill_after_s``."""

    name = "overflow"

    def __init__(self, dask: DaskBackend, vertex: VertexBackend, *, spill_after_s: float | None,
                 pinned: frozenset[str] = frozenset(),
                 on_spill: Callable[[JobRequest, float], None] | None = None) -> None:
        self._dask = dask
        self._vertex = vertex
        self._spill_after_s = spill_after_s
        self._pinned = pinned
        self._on_spill = on_spill
        self._lock = threading.Lock()
        self._spillable: dict[str, _SpillableRun] = {}

    def run(self, request: JobRequest, *, attempt: int) -> Execution:
        """Run ``request`` where it goes (see the module) and wait for it."""
        return outcome_of_one(self.submit([(request, attempt)]))

    def run_pack(self, jobs: Sequence[Job]) -> list[Execution | Exception]:
        """Tiny jobs run in turn in one Dask task; a pack never spills (each of its jobs is seconds of work)."""
        return self._dask.run_pack(jobs)

    def submit(self, jobs: Sequence[Job]) -> Submission:
        """Hand ``jobs`` to Vertex AI (a pinned type), or to Dask, spillable if it is one unsharded job."""
        request, attempt = jobs[0]
        if request.type.value in self._pinned:
            return submission(self._vertex, jobs)
        if len(jobs) > 1 or self._spill_after_s is None:
            return self._dask.submit(jobs)
        run = self._dask.submit(jobs, spill=spill_event_names(request.job_id, attempt))
        if not run.in_flight:  # sharded: it spreads over the workers when waited for, and never spills
            return run
        spillable = _SpillableRun(self, request, attempt, run, self._spill_after_s)
        with self._lock:
            self._spillable[request.job_id] = spillable
        return spillable

    def cancel(self, job_id: str) -> bool:
        """Cancel the job wherever it is: its Dask task's cancel event, or its custom job."""
        with self._lock:
            spillable = self._spillable.get(job_id)
        if spillable is not None:
            spillable.cancelled = True  # a spill not yet submitted to Vertex AI then never is
        on_dask = self._dask.cancel(job_id)
        on_vertex = self._vertex.cancel(job_id)
        return on_dask or on_vertex or spillable is not None

    def on_vertex(self) -> list[str]:
        """The jobs that spilled and run as custom jobs now (``GET /status``)."""
        with self._lock:
            runs = list(self._spillable.items())
        return sorted(job_id for job_id, run in runs if run.spilled)

    def gpu_slots(self) -> int:
        """The Dask workers' slots: Vertex AI is overflow, not capacity the consumer plans for."""
        return self._dask.gpu_slots()

    def ready(self) -> bool:
        """Ready when Dask is (Vertex AI is a managed API)."""
        return self._dask.ready() and self._vertex.ready()

    def close(self) -> None:
        """Close both backends."""
        self._dask.close()
        self._vertex.close()

    def _forget(self, job_id: str) -> None:
        with self._lock:
            self._spillable.pop(job_id, None)


class _SpillableRun:
    """One job on Dask that may spill to Vertex AI: the ``Submission`` of ``OverflowBackend``."""

    in_flight = True

    def __init__(self, owner: OverflowBackend, request: JobRequest, attempt: int, run: Any,
                 spill_after_s: float) -> None:
        self._owner = owner
        self._request = request
        self._attempt = attempt
        self._run = run
        self._started_event, self._spill_event = spill_event_names(request.job_id, attempt)
        self._submitted = time.monotonic()
        self._lock = threading.Lock()
        self._vertex: Future[Execution | Exception] | None = None  # set once the job spilled
        self._spilled_at: datetime | None = None
        self._spilled_after_s: float | None = None
        self._callbacks: list[Callable[[], None]] = []
        self.cancelled = False
        self.started: list[datetime] = []
        run.add_done_callback(self._dask_ended)
        self._timer = threading.Timer(spill_after_s, self._at_budget)
        self._timer.name = f"gpurt-spill-{request.job_id}"
        self._timer.daemon = True
        self._timer.start()

    @property
    def spilled(self) -> bool:
        """Whether the job went to Vertex AI."""
        with self._lock:
            return self._vertex is not None

    def done(self) -> bool:
        """Whether ``wait`` would return (or spill) without waiting for a worker or a custom job."""
        with self._lock:
            vertex = self._vertex
        return vertex.done() if vertex is not None else self._run.done()

    def start_clock(self) -> float:
        """The Dask task's deadline (a spilled job's custom job keeps its own timeout)."""
        return self._run.start_clock()

    def add_done_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the job ended where it runs; at once if it has."""
        with self._lock:
            ended = self._vertex.done() if self._vertex is not None else self._run.done()
            if not ended:
                self._callbacks.append(callback)
                return
        callback()

    def wait(self) -> list[Execution | Exception]:
        """The job's outcome: from its Dask worker, or from its custom job if it spilled."""
        outcome = self._run.wait()[0]  # a spilled job's task was dropped: this ends at once
        self._timer.cancel()
        if isinstance(outcome, SpillRefused):
            self._spill()  # the worker began just as the timer fired, saw the spill and refused the job
        with self._lock:
            vertex = self._vertex
        try:
            if vertex is None:
                self.started = self._run.started
                return [placed(outcome, "dask") if not isinstance(outcome, Exception) else outcome]
            self.started = [self._spilled_at or datetime.now(UTC)]
            return [vertex.result()]
        finally:
            self._owner._forget(self._request.job_id)
            self._forget_events()

    def _at_budget(self) -> None:
        """The budget is up: spill the job unless a worker began it (see the module for why this is race-free)."""
        from distributed import Event

        if self._run.done():
            return
        try:
            client = self._owner._dask.client
            Event(self._spill_event, client=client).set()
            if Event(self._started_event, client=client).is_set():
                return  # a worker began it first: it runs there, or refuses it and ``wait`` spills it
        except Exception:  # the Dask scheduler is away: the task's own outcome says what happened
            log.warning("could not decide whether to spill the job", exc_info=True,
                        extra={"job_id": self._request.job_id})
            return
        self._spill()

    def _spill(self) -> None:
        with self._lock:
            if self._vertex is not None:
                return
            self._spilled_after_s = time.monotonic() - self._submitted
            self._spilled_at = datetime.now(UTC)
            self._vertex = Future()
        self._run.abandon()  # its Dask task would only be refused now: free its place in the queue
        log.info("no GKE GPU after %.1f s: running it on Vertex AI", self._spilled_after_s,
                 extra={"job_id": self._request.job_id})
        if self._owner._on_spill is not None:
            self._owner._on_spill(self._request, self._spilled_after_s)
        threading.Thread(target=self._run_on_vertex, name=f"gpurt-vertex-{self._request.job_id}",
                         daemon=True).start()

    def _run_on_vertex(self) -> None:
        assert self._vertex is not None
        outcome: Execution | Exception
        try:
            if self.cancelled:
                raise JobCancelled("cancelled before its Vertex AI custom job was created")
            ran = self._owner._vertex.run(self._request, attempt=self._attempt, cancelled=lambda: self.cancelled)
            outcome = placed(ran, "vertex", self._spilled_after_s)
        except Exception as exc:
            outcome = exc
        self._vertex.set_result(outcome)
        self._call_back()

    def _dask_ended(self) -> None:
        # A spilled job's Dask task ends cancelled: its waiters are called back when the custom job ends instead.
        with self._lock:
            if self._vertex is not None:
                return
        self._call_back()

    def _call_back(self) -> None:
        with self._lock:
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def _forget_events(self) -> None:
        """Delete the start and spill marks from the Dask scheduler (a set event stays there until cleared)."""
        from distributed import Event

        client = self._owner._dask.client
        for name in (self._started_event, self._spill_event):
            try:
                Event(name, client=client).clear()
            except Exception as exc:  # the job's outcome matters more than this cleanup
                log.warning("could not clear the event %s: %s", name, exc)
