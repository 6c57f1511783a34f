"""A small HTTP server on its own background thread, for the local platform's side endpoints.

The emulator's admin port and the alert receiver each answer a handful of requests: the standard
library's threaded server is enough, and this wrapper gives both the same idempotent-enough lifecycle,
and ``ReplyHandler`` the same way to answer.
"""

from __future__ import annotations

import json
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ReplyHandler(BaseHTTPRequestHandler):
    """A request handler that answers in one call and writes no per-request line to stderr.

    The servers log what matters themselves (the receiver each notification, the emulator in JSON); the
    standard library's access line would only interleave with those.
    """

    def reply(self, status: HTTPStatus, payload: bytes, content_type: str) -> None:
        """Send ``payload`` with ``status``, its content type and length."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def reply_json(self, status: HTTPStatus, body: Any) -> None:
        """Send ``body`` as JSON with ``status``."""
        self.reply(status, json.dumps(body).encode(), "application/json")

    def log_message(self, format: str, *args: object) -> None:
        """Silence the default per-request stderr line (see the class docstring)."""


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
