"""A cancel requested on another replica reaches the job running here through the store marker."""

from __future__ import annotations

import uuid

from runtime.protocol.messages import JobRequest
from runtime.scheduler.cancel_watch import CancelWatcher
from runtime.scheduler.registry import JobRegistry
from runtime.scheduler.store import ResultStore


def test_markers_of_in_flight_jobs_are_acted_on_once() -> None:
    registry, store = JobRegistry(), ResultStore(f"memory://watch-{uuid.uuid4().hex}")
    cancelled: list[str] = []

    def cancel_here(job_id: str) -> bool:
        cancelled.append(job_id)
        return registry.mark_cancelled(job_id) is not None

    for job_id in ("a", "b"):
        registry.begin(JobRequest.model_validate({"job_id": job_id, "type": "noop"}), attempt=1)
    watcher = CancelWatcher(registry, store, cancel_here)
    assert watcher.check_once() == []
    store.request_cancel("b")  # written by the replica that served DELETE /jobs/b
    store.request_cancel("not-here")
    assert watcher.check_once() == ["b"]
    assert watcher.check_once() == []  # already flagged: not cancelled twice
    assert cancelled == ["b"]
