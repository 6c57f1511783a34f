"""Cancellation across replicas: ``DELETE /jobs/{id}`` may land on any replica.

The API writes a cancel marker to the shared result store; this watcher, one thread per replica,
looks for markers of the jobs running *here* and stops them. A job not yet running sees the marker
when it starts and ends ``cancelled`` without running.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from runtime.scheduler.periodic import Periodic
from runtime.scheduler.registry import JobRegistry
from runtime.scheduler.store import ResultStore

# How quickly a cancel reaches a job running on another replica (seconds); one store read per
# in-flight job per period.
WATCH_PERIOD_S: Final = 2.0

log = logging.getLogger(__name__)


class CancelWatcher(Periodic):
    """Polls the store's cancel markers of in-flight jobs and calls ``cancel`` for each one found."""

    def __init__(self, registry: JobRegistry, store: ResultStore, cancel: Callable[[str], bool],
                 period_s: float = WATCH_PERIOD_S) -> None:
        super().__init__("gpurt-cancel-watch", self.check_once, period_s)
        self._registry = registry
        self._store = store
        self._cancel = cancel

    def check_once(self) -> list[str]:
        """Cancel every in-flight job with a marker; returns their ids."""
        found = []
        for entry in self._registry.snapshot():
            job_id = entry.request.job_id
            if entry.cancel_requested:
                continue
            try:
                if self._store.cancel_requested(job_id):
                    self._cancel(job_id)
                    found.append(job_id)
            except Exception as exc:
                log.warning("cannot check the cancel marker: %s", exc, extra={"job_id": job_id})
        return found
