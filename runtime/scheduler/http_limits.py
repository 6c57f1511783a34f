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
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Final

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

# Control bodies are a few dozen bytes ({"workers": 3}); 64 KiB leaves room and costs nothing to hold.
MAX_BODY_BYTES: Final = 64 * 1024
# Probes and on-call tools send a request head at once; ten seconds is generous on any network.
HEADER_TIMEOUT_S: Final = 10.0
BODY_TIMEOUT_S: Final = 10.0
# The API's clients are the kubelet, Prometheus and on-call tools: a handful of connections at a time.
MAX_CONNECTIONS: Final = 128
KEEP_ALIVE_S: Final = 5


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

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Accept the connection, or close it at once when ``MAX_CONNECTIONS`` are open already."""
        super().connection_made(transport)
        if len(self.connections) > MAX_CONNECTIONS:
            self.logger.warning("closed a connection: %d are open, the limit is %d", len(self.connections) - 1,
                                MAX_CONNECTIONS)
            transport.close()
            return
        self._await_head()

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
        self._head_timer = self.loop.call_later(HEADER_TIMEOUT_S, self._head_too_slow, self.cycle)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self, cycle: Any) -> None:
        self._head_timer = None
        if self.cycle is cycle and not self.transport.is_closing():
            self.logger.warning("closed a connection that sent no request head within %g s", HEADER_TIMEOUT_S)
            self.transport.close()


def server_options() -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.Config``/``uvicorn.run`` that apply the limits above."""
    return {"http": BoundedH11Protocol, "timeout_keep_alive": KEEP_ALIVE_S}
