"""A job's cancel signal on the Dask scheduler, created only when a job is actually told to stop.

The worker watches a ``distributed.Event`` by name (``runtime.worker.task.stop_poller``). The Dask scheduler only
keeps an event once someone sets it (asking whether an unknown event is set answers False without
creating it), so a job that is never cancelled needs no event RPC at all: neither to make it nor, at
the end, to clear (delete) it. Only a set event is cleared afterwards.

Setting it also pushes its name to every worker (``runtime.worker.task.tell_stopped``): a running job learns of it
there without asking the Dask scheduler, which it does only once early in the job and rarely after.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from runtime.worker.task import tell_stopped

log = logging.getLogger(__name__)


class CancelSignal:
    """The cancel event of one delivery of a job; ``set`` and ``release`` are safe from any thread."""

    def __init__(self, client: Any, name: str) -> None:
        self.name = name
        self._client = client
        self._lock = threading.Lock()
        self._event: Any = None  # the distributed.Event, once set
        self._released = False

    @property
    def is_set(self) -> bool:
        """Whether ``set`` reached the Dask scheduler."""
        with self._lock:
            return self._event is not None

    def set(self) -> None:
        """Tell the task to stop: it does at its next checkpoint, or at its first if it has not started."""
        from distributed import Event

        with self._lock:
            if self._released or self._event is not None:
                return
            event = Event(self.name, client=self._client)
            event.set()
            self._event = event
        # After the set, so a job that starts watching later sees the event at its first look. On a thread:
        # a worker that is slow to answer must not hold up the cancel's caller (the API, a slot).
        threading.Thread(target=self._tell_workers, name="gpurt-cancel-push", daemon=True).start()

    def _tell_workers(self) -> None:
        try:
            self._client.run(tell_stopped, self.name, on_error="ignore")
        except Exception as exc:  # the workers' rare looks at the event still stop the job
            log.warning("could not push the cancel %s to the workers: %s", self.name, exc)

    def release(self) -> None:
        """The job has ended: delete the event from the Dask scheduler if it was set; later ``set`` calls do nothing."""
        with self._lock:
            self._released = True
            event, self._event = self._event, None
        if event is None:
            return
        try:
            event.clear()  # without waiters, clearing deletes the event on the Dask scheduler
        except Exception as exc:  # the job's outcome matters more than this cleanup
            log.warning("could not clear the cancel event %s: %s", self.name, exc)
