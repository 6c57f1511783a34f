"""The API's HTTP server: uvicorn's, with a main loop that waits for its exit instead of polling for it.

uvicorn's ``Server.main_loop`` wakes every 0.1 s to refresh its ``Date`` header (once a second) and to
see whether a signal asked it to exit. In a gpu-scheduler that waits for jobs, those ten wake-ups a
second were 2.5 ms of CPU per second of an otherwise idle server (measured on this project's machine,
docs/scheduler.md "Per-job cost"). ``QuietServer`` wakes once per ``tick_s`` for the header, and at once
when anything sets ``should_exit`` (uvicorn's signal handler, a second SIGINT's forced exit included).
uvicorn's request limit, which this service does not set, is looked at on the same tick.
With a ``ProbeListener``, the kubelet's probes are served in the same loop on their own socket, from the
server's start until after its shutdown (the drain included: the kubelet keeps probing a terminating pod).
Everything else is uvicorn's: the sockets, the graceful shutdown, the lifespan (which drains the service),
the signal re-raised after shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Final

import uvicorn

from runtime.scheduler.probe_listener import ProbeListener

# uvicorn refreshes the Date header every 10 ticks of its loop (on_tick's counter); one wake-up of this
# server stands for that many.
UVICORN_TICKS_PER_HEADER: Final = 10
# uvicorn's counter wraps at this many ticks (a day of 0.1 s ticks).
UVICORN_COUNTER_WRAP: Final = 864_000
# The Date header has a resolution of one second: refreshing it more often changes nothing.
TICK_S: Final = 1.0


class QuietServer(uvicorn.Server):
    """``uvicorn.Server`` whose main loop sleeps ``tick_s`` between wake-ups unless told to exit."""

    def __init__(self, config: uvicorn.Config, tick_s: float = TICK_S, probes: ProbeListener | None = None) -> None:
        self._tick_s = tick_s
        self._probes = probes
        self._exit_event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._should_exit = False
        super().__init__(config)

    @property  # uvicorn sets and reads a plain attribute of this name
    def should_exit(self) -> bool:
        """Whether the server is asked to exit; setting it wakes the main loop (from any thread)."""
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value
        if value and self._loop is not None and self._exit_event is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed: nothing left to wake
                self._loop.call_soon_threadsafe(self._exit_event.set)

    async def main_loop(self) -> None:
        """Wait for ``should_exit``, refreshing the Date header (uvicorn's ``on_tick``) every ``tick_s``."""
        self._loop = asyncio.get_running_loop()
        self._exit_event = asyncio.Event()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + UVICORN_TICKS_PER_HEADER) % UVICORN_COUNTER_WRAP
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exit_event.wait(), self._tick_s)


    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's startup, then the probes' listener (once the API serves, so is the liveness probe)."""
        await super().startup(sockets)
        if self.started and self._probes is not None:
            await self._probes.start()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown (the service's drain included), then the probes' listener."""
        try:
            await super().shutdown(sockets)
        finally:
            if self._probes is not None:
                await self._probes.stop()
