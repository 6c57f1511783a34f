"""Per-type routing: GPURT_VERTEX_TYPES jobs go to Vertex AI, the rest to Dask."""

from __future__ import annotations

from runtime.protocol.messages import JobRequest
from runtime.scheduler.backends.base import Execution
from runtime.scheduler.backends.routing import RoutingBackend


class Named:
    def __init__(self, name: str, slots: int) -> None:
        self.name = name
        self.slots = slots
        self.ran: list[str] = []
        self.closed = False

    def run(self, request: JobRequest, *, attempt: int) -> Execution:
        self.ran.append(request.job_id)
        return Execution(summary={"by": self.name})

    def cancel(self, job_id: str) -> bool:
        return job_id in self.ran

    def gpu_slots(self) -> int:
        return self.slots

    def ready(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


def test_types_go_to_their_backend_and_the_rest_to_the_default() -> None:
    dask, vertex = Named("dask", 4), Named("vertex", 0)
    router = RoutingBackend(default=dask, routes={"portfolio_var": vertex, "asian_option": vertex})
    var = JobRequest.model_validate({"job_id": "v", "type": "portfolio_var",
                                     "params": {"exposures": [1.0], "volatilities": [0.2]}})
    noop = JobRequest.model_validate({"job_id": "n", "type": "noop"})
    assert router.run(var, attempt=1).summary == {"by": "vertex"}
    assert router.run(noop, attempt=1).summary == {"by": "dask"}
    assert router.cancel("v") and not router.cancel("unknown")
    assert router.gpu_slots() == 4
    router.close()
    assert dask.closed and vertex.closed
