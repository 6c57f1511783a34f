"""A background thread that runs one action every period: the shape of the scheduler's pollers.

``start``/``stop`` are idempotent; a failing round is logged and the next period tries again, so a
briefly unreachable dependency never kills the poller.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Periodic:
    """Calls ``action`` every ``period_s`` seconds on a daemon thread named ``name``."""

    def __init__(self, name: str, action: Callable[[], object], period_s: float) -> None:
        self._name = name
        self._action = action
        self._period = period_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (no-op if running)."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for its current round."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.wait(self._period):
            try:
                self._action()
            except Exception as exc:
                log.warning("%s: round failed, retrying next period: %s", self._name, exc)
