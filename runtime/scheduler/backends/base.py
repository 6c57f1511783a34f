"""The seam between the consumer and whatever runs a job.

A backend runs one job to completion and returns an ``Execution`` (the kernels' own ``JobOutput``:
a Dask backend hands the worker's value through unchanged, a Vertex backend rebuilds it), or raises one of the kernels'
failure kinds: ``TransientJobError`` (worth another delivery: worker lost, timeout, CUDA OOM),
``PermanentJobError`` (never), ``JobCancelled`` (``cancel`` was called). Anything else it raises is
treated as transient by the consumer, so an unforeseen fault ends in ``failed`` after the last
delivery instead of being dropped.

A backend that can hand a job to its workers without waiting for it also has ``submit``: the slot that
runs a job submits its next one before the first ends, so the worker finds it queued (docs/scheduler.md,
"Submit ahead"). ``submission`` gives every backend that shape; one without ``submit`` runs its jobs when
they are waited for.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from kernels.jobs import JobOutput as Execution
from runtime.protocol.messages import JobRequest

__all__ = ["Execution", "ExecutionBackend", "Job", "PackingBackend", "Placed", "RunWhenWaited", "Submission",
           "placed", "submission"]

Job = tuple[JobRequest, int]  # a request and its delivery attempt


@dataclasses.dataclass(frozen=True)
class Placed(Execution):
    """An ``Execution`` that says where it ran (``JobMetrics.backend``) and, if it spilled to Vertex AI, after how
    many seconds of waiting for a GKE GPU (``JobMetrics.spilled_after_s``)."""

    backend: str = ""
    spilled_after_s: float | None = None


def placed(execution: Execution, backend: str, spilled_after_s: float | None = None) -> Placed:
    """``execution`` marked as run on ``backend``."""
    own = {field.name: getattr(execution, field.name) for field in dataclasses.fields(Execution)}
    return Placed(**own, backend=backend, spilled_after_s=spilled_after_s)


class ExecutionBackend(Protocol):
    """Runs jobs; safe to call from several consumer threads at once."""

    name: str

    def run(self, request: JobRequest, *, attempt: int) -> Execution:
        """Run ``request`` (delivery ``attempt``) within ``request.timeout_s``; blocks until it ends."""
        ...

    def cancel(self, job_id: str) -> bool:
        """Ask the running job ``job_id`` to stop; False if this backend is not running it."""
        ...

    def gpu_slots(self) -> int:
        """GPUs (or, without GPUs, worker slots) the backend can run at once; 0 if unknown."""
        ...

    def ready(self) -> bool:
        """Whether the backend can take jobs now (reachable, at least one worker or quota)."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class PackingBackend(ExecutionBackend, Protocol):
    """A backend that runs several tiny jobs in turn in one task (``runtime.scheduler.packing``): the processor hands it
    the tiny jobs waiting together only if it is one."""

    def run_pack(self, jobs: Sequence[Job]) -> list[Execution | Exception]:
        """Run ``jobs`` in turn in one task; one outcome per job, in order, each as ``run`` would give it."""
        ...


class Submission(Protocol):
    """Jobs handed to a backend: ``wait`` gives one outcome per job, in order (its ``Execution`` or its
    failure, as ``run`` would have raised it)."""

    @property
    def in_flight(self) -> bool:
        """Whether the jobs are already on their way to a worker (False: they run when waited for)."""
        ...

    def done(self) -> bool:
        """Whether ``wait`` would return without waiting for a worker: the jobs ended, or their time is up."""
        ...

    def start_clock(self) -> float:
        """The jobs' turn has come (the slot's job before them ended): their timeout counts from now, or from
        the first call. Returns the deadline (``time.monotonic``)."""
        ...

    def add_done_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (from any thread) once ``done``; at once if it is."""
        ...

    def wait(self) -> list[Execution | Exception]:
        """Wait for the jobs (each within its ``timeout_s``, counted from this call) and give their outcomes."""
        ...

    @property
    def started(self) -> list[datetime]:
        """When each job started on its worker, as well as the caller can tell (after ``wait``)."""
        ...


class RunWhenWaited:
    """The ``Submission`` of a backend without ``submit``: the jobs run when waited for, as one pack if the
    backend packs (``PackingBackend``), else one after another."""

    in_flight = False

    def __init__(self, backend: ExecutionBackend, jobs: Sequence[Job]) -> None:
        self._backend = backend
        self._jobs = list(jobs)
        self.started: list[datetime] = []

    def done(self) -> bool:
        """Never: waiting runs the jobs."""
        return False

    def start_clock(self) -> float:
        """No deadline before ``wait``: each job's own run keeps its timeout."""
        return math.inf

    def add_done_callback(self, callback: Callable[[], None]) -> None:
        """Nothing runs before ``wait``, so there is nothing to call back for."""

    def wait(self) -> list[Execution | Exception]:
        """Run the jobs; a failure is its job's outcome."""
        if isinstance(self._backend, PackingBackend) and len(self._jobs) > 1:
            self.started = [datetime.now(UTC)] * len(self._jobs)
            return self._backend.run_pack(self._jobs)
        outcomes: list[Execution | Exception] = []
        for request, attempt in self._jobs:
            self.started.append(datetime.now(UTC))
            try:
                outcomes.append(self._backend.run(request, attempt=attempt))
            except Exception as exc:
                outcomes.append(exc)
        return outcomes


def submission(backend: ExecutionBackend, jobs: Sequence[Job]) -> Submission:
    """Hand ``jobs`` to ``backend``: submitted now if it can (``submit``), else run when waited for."""
    submit: Callable[[Sequence[Job]], Submission] | None = getattr(backend, "submit", None)
    return submit(jobs) if submit is not None else RunWhenWaited(backend, jobs)


def outcome_of_one(submission: Submission) -> Execution:
    """The execution of a submission of one job, or its failure raised: what ``run`` returns."""
    outcome = submission.wait()[0]
    if isinstance(outcome, Exception):
        raise outcome
    return outcome
