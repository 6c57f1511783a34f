"""The emulator's background threads' shared lifecycle: one daemon thread that sleeps on a condition.

The journal's writer and the sweeper each run one loop that waits on its condition until there is work or
it is told to stop; this starts such a loop at most once and stops it by waking and joining it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class ConditionThread:
    """Runs ``loop`` on a daemon thread named ``name``; ``loop`` waits on ``cond`` and returns once ``stopping``."""

    def __init__(self, cond: threading.Condition, name: str, loop: Callable[[], None]) -> None:
        self._cond = cond
        self._name = name
        self._loop = loop
        self.stopping = False  # read by ``loop`` with ``cond`` held
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        """Whether the thread was ever started."""
        return self._thread is not None

    def start(self) -> None:
        """Start the thread (idempotent)."""
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()

    def stop(self) -> None:
        """Set ``stopping``, wake the loop and wait for it to return (idempotent; fine before ``start``)."""
        with self._cond:
            self.stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()
