"""The seam between the consumer and whatever runs a job.

A backend runs one job to completion and returns an ``Execution`` (the kernels' own ``JobOutput``:
a Dask backend hands the worker's value through unchanged, a Vertex backend rebuilds it), or raises one of the kernels'
failure kinds: ``TransientJobError`` (worth another delivery: worker lost, timeout, CUDA OOM),
``PermanentJobError`` (never), ``JobCancelled`` (``cancel`` was called). Anything else it raises is
treated as transient by the consumer, so an unforeseen fault ends in ``failed`` after the last
delivery instead of being dropped.
"""

from __future__ import annotations

from typing import Protocol

from kernels.jobs import JobOutput as Execution
from protocol.messages import JobRequest

__all__ = ["Execution", "ExecutionBackend"]


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
