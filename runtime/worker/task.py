"""The function a Dask worker runs for one job: ``kernels.jobs.run_job`` plus cooperative cancel.

Cancellation crosses processes through a ``distributed.Event`` named after the job and delivery
attempt (so a stale event of an earlier attempt can never stop a later one). Whoever sets the event also
pushes its name to every worker (``tell_stopped``, through ``Client.run``), so a running job learns of it
from a flag in its own process: the kernel's ``should_stop`` asks the Dask scheduler once,
``CANCEL_POLL_S`` into the job (for an event set before the job started watching), and afterwards only
every ``CANCEL_RECHECK_S`` in case a push was lost. A job waiting on its GPU then costs the Dask
scheduler no round trip four times a second, as the poll it replaced did.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Final

from kernels.params import JobParams, JobType

# The one look at the job's events (seconds into it) that catches a cancel set before it began watching;
# a shorter job never pays a round trip to the Dask scheduler.
CANCEL_POLL_S: Final = 0.25
# The looks after it, a backstop for a push to this worker that was lost (worker reconnecting): such a
# cancel is honoured within this long, any other at the job's next checkpoint.
CANCEL_RECHECK_S: Final = 10.0


class _Watch:
    """What one running job (or shard) watches: its events' names, and the flag a push sets."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = frozenset(names)
        self.flag = threading.Event()


# The watches of the jobs running in this process. Weak: a watch lives as long as its job's ``should_stop``,
# so a finished job drops out without being told to.
_WATCHES: weakref.WeakSet[_Watch] = weakref.WeakSet()
_WATCHES_LOCK = threading.Lock()


def task_key(job_id: str, attempt: int, nonce: str) -> str:
    """The Dask key of one delivery of ``job_id`` (``nonce`` makes a resubmission's key new).

    The attempt number comes before the job id on purpose: Dask names a task's prefix and TaskGroup after
    the key's leading words up to the first one that is not all letters (``dask.utils.key_split``), and keeps
    every prefix for as long as it runs. After ``gpurt-<job_id>``, a job id of letters and dashes only
    (``eod-book-usd``) would make a prefix of its own per job, a record the Dask scheduler never drops;
    ``gpurt-<attempt>`` makes every job's prefix and TaskGroup ``gpurt``.
    """
    return f"gpurt-{attempt}-{job_id}-{nonce}"


def cancel_event_name(job_id: str, attempt: int) -> str:
    """The ``distributed.Event`` that tells the worker running this delivery of ``job_id`` to stop."""
    return f"gpurt-cancel-{job_id}-{attempt}"


class SpillRefused(Exception):
    """This delivery went to Vertex AI (overflow) before this worker began it: the worker does not run it."""


def spill_event_names(job_id: str, attempt: int) -> tuple[str, str]:
    """The ``distributed.Event`` a worker sets as it begins this delivery of ``job_id`` (started), and the one the
    gpu-scheduler sets when it means to run the delivery on Vertex AI instead (spill)."""
    return f"gpurt-started-{job_id}-{attempt}", f"gpurt-spill-{job_id}-{attempt}"


def claim_start(started: str, spill: str) -> None:
    """Mark the job begun here, then refuse it if it was spilled. The gpu-scheduler sets the spill event, then reads
    the started one: whichever side comes second sees the other's mark, so a job never runs in both places."""
    from distributed import Event

    Event(started).set()
    if Event(spill).is_set():
        raise SpillRefused(f"{spill}: the job went to Vertex AI before this worker began it")


def execute(job_type: JobType, params: JobParams, device: str, event_name: str,
            spill: tuple[str, str] | None = None) -> object:
    """Run one job on this worker; returns ``kernels.jobs.JobOutput`` (pickled back to the scheduler).

    ``spill`` (``spill_event_names``): the job may overflow to Vertex AI, so it first claims its start.
    """
    from kernels.jobs import run_job
    from runtime.worker.warm import wait_warm

    if spill is not None:
        claim_start(*spill)
    should_stop = stop_poller(event_name)
    if job_type is not JobType.NOOP:  # a noop has no kernel to wait for
        wait_warm(should_stop)
    return run_job(job_type, params, device=device, should_stop=should_stop)


def execute_pack(jobs: Sequence[tuple[JobType, JobParams, str]], device: str) -> list[object]:
    """Run several tiny jobs in turn on this worker (``runtime.scheduler.packing``); one outcome per job, in order.

    ``jobs`` are ``(type, params, cancel event name)``. A job that fails fails alone: its outcome is the
    exception (a ``JobFailure``, or the ``ValueError`` of params the kernel refused; anything else becomes a
    ``TransientJobError`` naming it, so every outcome pickles back), and the next job runs.
    """
    from kernels.errors import JobFailure, TransientJobError

    outcomes: list[object] = []
    for job_type, params, event_name in jobs:
        try:
            outcomes.append(execute(job_type, params, device, event_name))
        except (JobFailure, ValueError) as exc:
            outcomes.append(exc)
        except Exception as exc:  # one job's fault must not fail the others of its pack
            outcomes.append(TransientJobError(f"{type(exc).__name__}: {exc}"))
    return outcomes


def tell_stopped(name: str) -> int:
    """Run on every worker (``Client.run``) once the event ``name`` is set: the jobs of this process that
    watch it stop at their next checkpoint. Returns how many jobs here watch it."""
    with _WATCHES_LOCK:
        watching = [watch for watch in _WATCHES if name in watch.names]
    for watch in watching:
        watch.flag.set()
    return len(watching)


def stop_poller(*event_names: str) -> Callable[[], bool]:
    """A kernel's ``should_stop`` for events ``event_names``: a job's cancel event, and for a shard also the
    event that says another attempt of it already finished.

    It answers True from the first time any of them is known set: pushed here (``tell_stopped``), or seen
    at one of its rare looks at the Dask scheduler (``CANCEL_POLL_S``, then every ``CANCEL_RECHECK_S``).
    The watch is registered before the first look, so an event set at any moment is either seen by a
    look or pushed to a registered watch.
    """
    from distributed import Event

    events = [Event(name) for name in event_names]
    watch = _Watch(event_names)
    with _WATCHES_LOCK:
        _WATCHES.add(watch)
    next_look = time.monotonic() + CANCEL_POLL_S

    def should_stop() -> bool:
        nonlocal next_look
        if watch.flag.is_set():
            return True
        now = time.monotonic()
        if now >= next_look:
            next_look = now + CANCEL_RECHECK_S
            if any(event.is_set() for event in events):
                watch.flag.set()
        return watch.flag.is_set()

    return should_stop
