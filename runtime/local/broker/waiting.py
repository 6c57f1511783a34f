"""Waiting for a subscription to change, from a coroutine on the server's event loop.

The broker is guarded by one threading lock and changed from the event loop and from the sweeper
thread. A coroutine must never block the loop on a ``threading.Condition``, so each waiting Pull or
StreamingPull registers a :class:`Wakeup` with its subscription's queue instead: every change of the
queue calls it (with the lock held, from whichever thread), and it sets an ``asyncio.Event`` on the
loop. A waiter therefore costs an event, not a thread, and any number of streams can wait at once.
"""

from __future__ import annotations

import asyncio
import contextlib


class Wakeup:
    """An asyncio event that any thread may set; one per waiting RPC."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        # A wake-up already on its way to the loop: a burst of changes (a 1000-message publish) then costs
        # one callback per waiter, not one each. Reset before the event is set, so none is lost.
        self._pending = False

    def __call__(self) -> None:
        """Wake the waiter; safe from any thread."""
        if self._pending:
            return
        self._pending = True
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting any more
            self._loop.call_soon_threadsafe(self._set)

    def _set(self) -> None:
        self._pending = False
        self._event.set()

    def clear(self) -> None:
        """Forget earlier wake-ups; call before checking the condition, so none made after it is lost."""
        self._event.clear()

    async def wait(self, timeout_s: float | None = None) -> None:
        """Return once woken, or after ``timeout_s`` seconds (None: no limit)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout_s)
