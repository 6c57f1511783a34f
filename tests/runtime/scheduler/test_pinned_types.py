"""Pinned types: GPURT_VERTEX_TYPES jobs always go to Vertex AI, the rest to Dask (no spill budget: never spilled)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.protocol.messages import JobRequest
from runtime.scheduler.backends.base import Execution, Job, RunWhenWaited
from runtime.scheduler.backends.overflow import OverflowBackend


class Named:
    def __init__(self, name: str, slots: int) -> None:
        self.name = name
        self.slots = slots
        self.ran: list[str] = []
        self.closed = False

    def run(self, request: JobRequest, *, attempt: int) -> Execution:
        self.ran.append(request.job_id)
        return Execution(summary={"by": self.name})

    def submit(self, jobs: Sequence[Job], **_options: Any) -> RunWhenWaited:
        return RunWhenWaited(self, jobs)

    def cancel(self, job_id: str) -> bool:
        return job_id in self.ran

    def gpu_slots(self) -> int:
        return self.slots

    def ready(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


def test_pinned_types_go_to_vertex_ai_and_the_rest_to_dask() -> None:
    dask, vertex = Named("dask", 4), Named("vertex", 0)
    backend = OverflowBackend(dask, vertex, spill_after_s=None,  # type: ignore[arg-type]
                              pinned=frozenset({"portfolio_var", "asian_option"}))
    var = JobRequest.model_validate({"job_id": "v", "type": "portfolio_var",
                                     "params": {"exposures": [1.0], "volatilities": [0.2]}})
    noop = JobRequest.model_validate({"job_id": "n", "type": "noop"})
    assert backend.run(var, attempt=1).summary == {"by": "vertex"}
    assert backend.run(noop, attempt=1).summary == {"by": "dask"}
    assert backend.cancel("v") and not backend.cancel("unknown")
    assert backend.gpu_slots() == 4  # Vertex AI is overflow, not capacity the consumer plans for
    backend.close()
    assert dask.closed and vertex.closed
