"""The jobs this replica runs now: for ``GET /jobs/{id}``, cancellation and in-flight duplicates."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime

from runtime.protocol.messages import JobRequest
from runtime.scheduler.records import InFlight


class JobRegistry:
    """Thread-safe map of job id -> ``InFlight``; ``on_change`` receives the in-flight count."""

    def __init__(self, on_change: Callable[[int], None] = lambda count: None) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, InFlight] = {}
        self._on_change = on_change

    def begin(self, request: JobRequest, attempt: int) -> InFlight | None:
        """Register ``request`` as running; returns ``None`` if the same job id already runs here."""
        with self._lock:
            if request.job_id in self._jobs:
                return None
            entry = InFlight(request=request, attempt=attempt, started_at=datetime.now(UTC))
            self._jobs[request.job_id] = entry
            count = len(self._jobs)
        self._on_change(count)
        return entry

    def end(self, entry: InFlight) -> None:
        """Unregister ``entry`` and wake whoever waits for it."""
        with self._lock:
            if self._jobs.get(entry.request.job_id) is entry:
                del self._jobs[entry.request.job_id]
            count = len(self._jobs)
        entry.done.set()
        self._on_change(count)

    def get(self, job_id: str) -> InFlight | None:
        """The running entry for ``job_id``."""
        with self._lock:
            return self._jobs.get(job_id)

    def wait(self, job_id: str, timeout_s: float) -> bool:
        """Block until ``job_id`` is no longer running here (True) or ``timeout_s`` passes (False)."""
        entry = self.get(job_id)
        return True if entry is None else entry.done.wait(timeout_s)

    def mark_cancelled(self, job_id: str) -> InFlight | None:
        """Flag ``job_id`` as cancelled by request; returns its entry if it runs here."""
        with self._lock:
            entry = self._jobs.get(job_id)
            if entry is not None:
                entry.cancel_requested = True
            return entry

    def count(self) -> int:
        """Jobs running now."""
        with self._lock:
            return len(self._jobs)

    def snapshot(self) -> list[InFlight]:
        """The running entries."""
        with self._lock:
            return list(self._jobs.values())
