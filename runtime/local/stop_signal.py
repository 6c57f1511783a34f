"""SIGTERM and SIGINT for the local platform's own processes: a handler that takes no lock, and a wait for it."""

from __future__ import annotations

import signal
import time
from typing import Final

# How often the main thread looks at the flag (seconds): the stop starts at most this late after the signal.
POLL_S: Final = 0.1


class StopSignal:
    """Installs handlers for SIGTERM and SIGINT that only record the signal; ``wait()`` blocks until one came.

    A handler that calls ``threading.Event.set()`` can deadlock the process it should stop: Python runs the
    handler in the main thread between two bytecodes, and when the main thread is inside ``Event.wait()`` at that
    moment, holding the Event's own lock (a plain, non-reentrant Lock), ``set()`` waits for that lock forever.
    A broker sent SIGTERM right after it started hung so under load. Setting an attribute takes no lock.
    """

    def __init__(self) -> None:
        """Install the handlers now: a signal that comes before ``wait()`` is not lost."""
        self.received: int | None = None
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.received = signum

    def wait(self) -> int:
        """Block until SIGTERM or SIGINT has come; returns which."""
        while self.received is None:
            time.sleep(POLL_S)  # a signal ends the sleep early only after its handler ran, and the loop looks again
        return self.received
