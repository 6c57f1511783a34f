"""What one HTTP client may cost the scheduler: body size, time to send headers and body, open connections.

uvicorn bounds none of these by itself: it has no timeout for a request's headers (a connection that
sends nothing stays open for ever), no cap on connections, and FastAPI reads any body whole. A replica's
API answers the kubelet's probes and Prometheus, so a client that holds connections or memory must not
be able to starve them. The limits:

- ``MAX_BODY_BYTES``: a larger body gets 413, from its ``Content-Length`` before any of it is read, or
  as soon as a chunked body passes the cap;
- ``HEADER_TIMEOUT_S``: a connection that has not sent a whole request head this long after it opened
  (or after its previous response) is closed;
- ``BODY_TIMEOUT_S``: a body not received in full this long after its head gets 408;
- ``MAX_CONNECTIONS``: a connection beyond this many open ones is closed at once;
- ``KEEP_ALIVE_S``: an idle kept-alive connection is closed (uvicorn's own timer).

The probes' listener (``probe_listener.py``) has limits of its own, for the one client it serves: the kubelet
opens a connection per probe, sends its request at once and gives up after the probe's ``timeoutSeconds``
(https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/
#configure-probes; 3 s in the Deployment, ``runtime.manifests.scheduler.PROBE_TIMEOUT_S``).
``PROBE_MAX_CONNECTIONS`` and ``PROBE_HEADER_TIMEOUT_S`` bound it. Past its cap a new connection is admitted
and the oldest connection that has sent nothing (none of its bytes read or waiting in its socket) is closed to
make room. A flood of silent connections on the probes' own port then only ever closes its own oldest sockets,
while a probe, whose request follows its connection at once, is never the oldest silent one (a cap that
refused every newcomer failed 106 probes of 106 under such a flood).

A refused or timed-out connection is logged at most once per ``LOG_EVERY_S``, with how many there were
(a flood logged one line per connection: 265,407 lines, 44 MB, in 96 s).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from typing import Any, Final

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from runtime.protocol import contract
from runtime.scheduler.logs import Throttled

# Control bodies are a few dozen bytes ({"workers": 3}); 64 KiB leaves room and costs nothing to hold.
MAX_BODY_BYTES: Final = 64 * 1024
# Probes and on-call tools send a request head at once; ten seconds is generous on any network.
HEADER_TIMEOUT_S: Final = 10.0
BODY_TIMEOUT_S: Final = 10.0
# The API's clients are the kubelet, Prometheus and on-call tools: a handful of connections at a time.
MAX_CONNECTIONS: Final = contract.API_MAX_CONNECTIONS
KEEP_ALIVE_S: Final = 5
# The kubelet needs a connection or three at a time (liveness, readiness, startup). The cap is set far above that
# because, under a flood, a probe's connection is safe from eviction only once its request is read, and until
# then it survives as many newer connections as the cap holds: 256 gives a probe whose request lags its
# connection by a loaded machine's scheduling delay (tens of ms) room against a flood that reconnects a
# thousand times a second. Each silent connection costs a descriptor and a few KB for at most a second.
PROBE_MAX_CONNECTIONS: Final = contract.PROBE_MAX_CONNECTIONS
# The kubelet sends its request with the connection (microseconds later on the node); a second is ample, and a
# third of the Deployment's probe timeout.
PROBE_HEADER_TIMEOUT_S: Final = 1.0
# A refused or timed-out connection is logged at most this often (seconds), with the count since the last line.
LOG_EVERY_S: Final = 10.0


async def refuse(send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Answer ``{"detail": ...}`` with ``status`` and close the connection: any unread body is not wanted."""
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class LimitBody:
    """ASGI middleware: a request body over ``max_bytes`` gets 413, one slower than ``timeout_s`` gets 408."""

    def __init__(self, app: ASGIApp, max_bytes: int | None = None, timeout_s: float | None = None) -> None:
        self._app = app
        # The module's limits are read when the app is built, not when this module is imported.
        self._max_bytes = MAX_BODY_BYTES if max_bytes is None else max_bytes
        self._timeout_s = BODY_TIMEOUT_S if timeout_s is None else timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse from ``Content-Length`` alone when it can, else count and time the body as it arrives."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = next((value for name, value in scope["headers"] if name == b"content-length"), None)
        if declared is not None and (not declared.isdigit() or int(declared) > self._max_bytes):
            await refuse(send, 413, self._too_large())
            return
        received = 0
        deadline = asyncio.get_running_loop().time() + self._timeout_s

        async def limited() -> Message:
            nonlocal received
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise HTTPException(408, f"the request body did not arrive within {self._timeout_s:g} s") from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self._max_bytes:
                    raise HTTPException(413, self._too_large())
            return message

        await self._app(scope, limited, send)

    def _too_large(self) -> str:
        return f"the request body is larger than {self._max_bytes} bytes"


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request head and a cap on open connections."""

    _head_timer: asyncio.TimerHandle | None = None
    _opened_at = 0.0

    @staticmethod
    def max_connections() -> int:
        """The cap on open connections (read when a connection opens, so a test may set the module's)."""
        return MAX_CONNECTIONS

    @staticmethod
    def header_timeout_s() -> float:
        """How long a connection may take to send a request head."""
        return HEADER_TIMEOUT_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Accept the connection, or close it at once when ``max_connections()`` are open already."""
        super().connection_made(transport)
        self._opened_at = self.loop.time()
        if self._open_connections() > self.max_connections() and not self._make_room():
            _REFUSED.warning(self.logger, "closed connections past the cap of %d open ones", self.max_connections())
            transport.close()
            return
        self._await_head()

    def _open_connections(self) -> int:
        """The connections counted against the cap, this one included."""
        return len(self.connections)

    def _make_room(self) -> bool:
        """Free a place for this connection past the cap; False: refuse it (the API keeps its cap that way)."""
        return False

    def data_received(self, data: bytes) -> None:
        """Parse as uvicorn does; a request head that arrived stops the head deadline."""
        cycle = self.cycle
        super().data_received(data)
        if self.cycle is not cycle:
            self._stop_head_timer()

    def on_response_complete(self) -> None:
        """After a response the next request head gets its own deadline (unless one is pipelined already)."""
        cycle = self.cycle
        super().on_response_complete()
        if self.cycle is cycle and not self.transport.is_closing():
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the deadline with the connection."""
        self._stop_head_timer()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        self._stop_head_timer()
        self._head_timer = self.loop.call_later(self.header_timeout_s(), self._head_too_slow, self.cycle)

    @property
    def awaiting_head(self) -> bool:
        """Whether the connection is open and has not sent its (next) request head yet."""
        return self._head_timer is not None and not self.transport.is_closing()

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self, cycle: Any) -> None:
        self._head_timer = None
        if self.cycle is cycle and not self.transport.is_closing():
            _SLOW.warning(self.logger, "closed connections that sent no request head within %g s",
                          self.header_timeout_s())
            self.transport.close()


class ProbeH11Protocol(BoundedH11Protocol):
    """The probes' protocol: their own cap and head deadline, and past the cap the oldest silent connection goes."""

    @staticmethod
    def max_connections() -> int:
        """The probes' cap on open connections."""
        return PROBE_MAX_CONNECTIONS

    @staticmethod
    def header_timeout_s() -> float:
        """How long a probe's connection may take to send its request head."""
        return PROBE_HEADER_TIMEOUT_S

    def _open_connections(self) -> int:
        """Connections not closing yet: one this listener closed to make room leaves the set only once the
        loop has seen it go, and must not count against the room it made (under a flood there are many)."""
        return sum(1 for c in self.connections if not c.transport.is_closing())

    def _make_room(self) -> bool:
        """Close the oldest other connection that has sent nothing; False: refuse this one (every other connection
        has a request under way, or its bytes waiting to be read).

        The newest connection is the last to go: a probe, whose request follows its connection within
        microseconds, is never the oldest silent one before its request is read."""
        idle = sorted((c for c in self.connections
                       if c is not self and isinstance(c, BoundedH11Protocol) and c.awaiting_head),
                      key=lambda c: c._opened_at)
        silent = next((c for c in idle if not _has_bytes_waiting(c.transport)), None)
        if silent is None:
            return False
        _EVICTED.warning(self.logger, "closed the oldest silent connections to admit requests past the cap of %d",
                         self.max_connections())
        silent.transport.close()
        return True


def _has_bytes_waiting(transport: asyncio.BaseTransport) -> bool:
    """Whether the peer has sent bytes that the server has not read yet (peeked, so they stay for the parser)."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    try:
        # asyncio's socket wrapper does not let a protocol read; a duplicate of the descriptor peeks instead.
        with socket.socket(fileno=os.dup(sock.fileno())) as peek:
            return bool(peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except OSError:  # nothing yet (BlockingIOError), or the peer is gone
        return False


def server_options() -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.Config``/``uvicorn.run`` that apply the limits above."""
    return {"http": BoundedH11Protocol, "timeout_keep_alive": KEEP_ALIVE_S}


def probe_server_options() -> dict[str, Any]:
    """The same for the probes' listener: its protocol (its own cap, deadline and eviction)."""
    return {"http": ProbeH11Protocol, "timeout_keep_alive": KEEP_ALIVE_S}


# One throttle per kind of line, shared by every connection of the process (the API's and the probes').
_REFUSED = Throttled(LOG_EVERY_S)
_SLOW = Throttled(LOG_EVERY_S)
_EVICTED = Throttled(LOG_EVERY_S)
