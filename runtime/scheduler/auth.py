"""Bearer-token check of the scheduler's HTTP API: secure by default, constant time, before any body is read.

The check is ASGI middleware rather than a FastAPI dependency because FastAPI reads (and parses) a
request's body before it resolves the route's dependencies: an unauthenticated 128 MB POST was held in
memory before its 401. Here the headers decide, and a refused request's body is never received.
"""

from __future__ import annotations

import hmac
from typing import Final

from starlette.types import ASGIApp, Receive, Scope, Send

from runtime.protocol import contract
from runtime.scheduler.http_limits import refuse

# The only paths served without a token: probes (the kubelet, `gpurt local status`), Prometheus' scrape,
# and the API's own description. Job results, in-flight job ids, the store URL and pools are not public.
OPEN_PATHS: Final = frozenset({
    contract.HEALTH_PATH, contract.READY_PATH, contract.METRICS_PATH, "/docs", "/docs/oauth2-redirect",
    "/openapi.json",
})


class RequireToken:
    """ASGI middleware: every HTTP request outside ``OPEN_PATHS`` must carry ``Authorization: Bearer <token>``.

    Without a configured token those requests get 503 (the API is closed, not open); with one, a missing
    or wrong token gets 401. Either way the answer goes out before the request's body is read.
    """

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self._app = app
        self._token = token.encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or answer 401/503 from its headers alone."""
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self._app(scope, receive, send)
            return
        if self._token is None:
            await refuse(send, 503,
                         f"the control API is disabled: set {contract.SchedulerEnv.CONTROL_TOKEN} to enable it")
            return
        if not authorized(scope, self._token):
            await refuse(send, 401, "a valid bearer token is required", [(b"www-authenticate", b"Bearer")])
            return
        await self._app(scope, receive, send)


def authorized(scope: Scope, token: bytes | None) -> bool:
    """Whether the request of ``scope`` carries ``Authorization: Bearer <token>`` (never, with no token set).

    Also for an open path that answers more to the token's holder: ``/readyz`` names its reasons only to them.
    """
    if token is None:
        return False
    header = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
    scheme, _, given = header.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token)
