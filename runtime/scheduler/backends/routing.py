"""Route jobs to a backend by type (GPURT_VERTEX_TYPES), the rest to the default backend."""

from __future__ import annotations

from collections.abc import Sequence

from runtime.protocol.messages import JobRequest
from runtime.scheduler.backends.base import Execution, ExecutionBackend, Job, Submission, submission


class RoutingBackend:
    """``routes[type]`` runs jobs of that type; ``default`` runs the others."""

    name = "routing"

    def __init__(self, default: ExecutionBackend, routes: dict[str, ExecutionBackend]) -> None:
        self._default = default
        self._routes = dict(routes)
        self._backends = [default, *{id(b): b for b in routes.values() if b is not default}.values()]

    def run(self, request: JobRequest, *, attempt: int) -> Execution:
        """Run on the backend of the request's type."""
        return self._routes.get(request.type.value, self._default).run(request, attempt=attempt)

    def submit(self, jobs: Sequence[Job]) -> Submission:
        """Hand ``jobs`` (of one type: only a backend that packs gets several) to the backend of their type."""
        return submission(self._routes.get(jobs[0][0].type.value, self._default), jobs)

    def cancel(self, job_id: str) -> bool:
        """Whichever backend runs ``job_id`` cancels it."""
        return any(backend.cancel(job_id) for backend in self._backends)

    def gpu_slots(self) -> int:
        """Slots of all backends."""
        return sum(backend.gpu_slots() for backend in self._backends)

    def ready(self) -> bool:
        """Ready when every backend is."""
        return all(backend.ready() for backend in self._backends)

    def close(self) -> None:
        """Close all."""
        for backend in self._backends:
            backend.close()
