"""A small HTTP server on its own background thread, for the local platform's side endpoints.

The emulator's admin port and the alert receiver each answer a handful of requests: the standard
library's threaded server is enough, and this wrapper gives both the same idempotent-enough lifecycle.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class BackgroundHttpServer:
    """Serves ``handler`` on ``host:port`` (0 picks a free port, then read ``port``) from a daemon thread."""

    def __init__(self, host: str, port: int, handler: type[BaseHTTPRequestHandler], name: str) -> None:
        self._httpd = ThreadingHTTPServer((host, port), handler)
        self._httpd.daemon_threads = True  # a slow client never holds up stop()
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=name, daemon=True)

    def start(self) -> None:
        """Serve in the background."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()
