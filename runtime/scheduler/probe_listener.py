"""The kubelet's probes on a listener of their own, served in the API server's event loop.

The API caps its open connections (``http_limits.MAX_CONNECTIONS``) and closes any connection past the cap
at once. The kubelet opens a new connection for every probe, so a client holding the API's connections
(half-open sockets, reconnecting as fast as they are closed) failed most probes and would have had the
replica restarted. Here the probes get a socket and a uvicorn server state of their own, which a flood of the
API's port does not touch, with limits of their own (``http_limits.ProbeH11Protocol``): a small cap, a short
head deadline, and past the cap the oldest silent connection is closed instead of the new one, so a flood of
the probes' own port does not keep the kubelet out either.

The listener runs in the API server's loop, not a thread of its own, so ``/healthz`` still says that the
loop serving the API turns. The probes' socket is admitted only from the node (the kubelet): the
namespace's default-deny NetworkPolicy opens no path to it (``runtime/manifests/network.py``).
"""

from __future__ import annotations

import socket

import uvicorn
from starlette.types import ASGIApp

from runtime.scheduler.http_limits import probe_server_options


def listen(host: str, port: int, backlog: int) -> socket.socket:
    """A socket listening on ``host:port`` (0: any free port); connections wait in its backlog until served.

    Listening at once holds the port against every other bind, as the API's socket does before the
    service starts (``runtime.scheduler.__main__``). Raises ``OSError`` when the port is taken.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=backlog)


class ProbeListener:
    """Serves ``app`` on ``sock`` (bound and listening) inside a running server's loop; ``start``/``stop`` async."""

    def __init__(self, app: ASGIApp, sock: socket.socket) -> None:
        # No lifespan: the API's app owns the service's start and drain; the probes only read it.
        config = uvicorn.Config(app, lifespan="off", log_config=None, access_log=False, **probe_server_options())
        self._server = uvicorn.Server(config)
        self._socket = sock

    @property
    def port(self) -> int:
        """The port the probes are served on."""
        return int(self._socket.getsockname()[1])

    async def start(self) -> None:
        """Accept probe connections from now on, in the running loop. Idempotent."""
        server = self._server
        if server.started:
            return
        # What uvicorn.Server.serve does before its startup, without its signal handling: the API's server
        # owns the process's signals.
        if not server.config.loaded:
            server.config.load()
        server.lifespan = server.config.lifespan_class(server.config)
        await server.startup(sockets=[self._socket])

    async def stop(self) -> None:
        """Stop accepting, let the probes being answered finish, close the socket. Idempotent."""
        if self._server.started:
            self._server.started = False
            await self._server.shutdown(sockets=[self._socket])
