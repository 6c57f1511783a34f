"""The scheduler's connection to Dask: a ``distributed.Client`` whose messages to the Dask scheduler leave promptly.

Dask's client batches what it sends to its scheduler (task submissions, key releases) and writes at
most once per 10 ms. That suits a notebook sending graphs; the gpu-scheduler instead submits one task
per slot and waits for it, so a slot's next submit usually lands inside the window its last one opened
and waits out the rest: with one job per worker at a time, Dask alone managed 93 jobs/s on one worker
behind the 10 ms window and 126-133 jobs/s behind a 1 ms one (``gpurt bench runtime``, 2 cores).
A 1 ms window still coalesces a sharded job's burst of submits into a few writes.

The window is set again whenever the client connects, so a client that reconnected after a Dask
scheduler restart keeps it.
"""

from __future__ import annotations

from typing import Any, Final

from distributed import Client

# Longest a message to the Dask scheduler waits for others to share its write (seconds); Dask's own is 10 ms.
SEND_INTERVAL_S: Final = 0.001


class PromptClient(Client):
    """A ``distributed.Client`` that writes to the Dask scheduler at most ``SEND_INTERVAL_S`` after a submit."""

    async def _ensure_connected(self, timeout: Any = None) -> None:
        # Dask builds the batched stream to its scheduler here, on the first connect and on every
        # reconnect, always with its 10 ms window; it has no setting for it.
        await super()._ensure_connected(timeout=timeout)
        if self.scheduler_comm is not None:
            self.scheduler_comm.interval = SEND_INTERVAL_S
