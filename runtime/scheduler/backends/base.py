"""The seam between the consumer and whatever runs a job.

A backend runs one job to completion and returns an ``Execution``, or raises one of the kernels'
failure kinds: ``TransientJobError`` (worth another delivery: worker lost, timeout, CUDA OOM),
``PermanentJobError`` (never), ``JobCancelled`` (``cancel`` was called). Anything else it raises is
treated as transient by the consumer, so an unforeseen fault ends in ``failed`` after the last
delivery instead of being dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from runtime.protocol import JobRequest


@dataclass(frozen=True)
class Execution:
    """What a job produced, as the consumer stores and publishes it."""

    summary: dict[str, Any]
    artifacts: dict[str, bytes] = field(default_factory=dict)
    device: str = "cpu"
    run_s: float = 0.0
    paths: int = 0


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
