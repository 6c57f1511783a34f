"""Every replica's flow control follows the pools' GPU slots.

A pool scaled through this replica's API resizes its consumer at once; this thread catches the rest:
a scale made through another replica, the leader's reconciler, workers that finished retiring.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Final

# How long another replica's scale takes to reach this one's flow control (seconds); one pool listing
# per period.
FOLLOW_PERIOD_S: Final = 15.0

log = logging.getLogger(__name__)


class SlotFollower:
    """Calls ``follow`` every ``period_s`` on its own thread; ``start``/``stop`` are idempotent."""

    def __init__(self, follow: Callable[[], None], period_s: float = FOLLOW_PERIOD_S) -> None:
        self._follow = follow
        self._period = period_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start following (no-op if running)."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="gpurt-slot-follow", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop following."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.wait(self._period):
            try:
                self._follow()
            except Exception as exc:  # the pools' API may be briefly unreachable; the next period retries
                log.warning("cannot read the pools' GPU slots: %s", exc)
