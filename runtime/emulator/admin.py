"""Emulator-only admin view: ``GET /stats`` as JSON on an optional HTTP port.

The real Pub/Sub emulator has nothing like this; the local platform reads it for backlog and DLQ-depth
metrics, and validation for "DLQs are empty". Stats are also available in-process through
``EmulatorHandle.stats()``.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from runtime.emulator.stats import EmulatorStats

STATS_PATH = "/stats"


def stats_json(stats: EmulatorStats) -> dict:
    """The JSON document served at /stats."""
    return {
        "subscriptions": {s.name: dataclasses.asdict(s) for s in stats.subscriptions},
        "published": stats.published,
    }


class AdminServer:
    """A small threaded HTTP server in a background thread."""

    def __init__(self, host: str, port: int, stats: Callable[[], EmulatorStats]) -> None:
        handler = _handler_for(stats)
        self._httpd = ThreadingHTTPServer((host, port), handler)
        self._httpd.daemon_threads = True
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="pubsub-emulator-admin", daemon=True)

    def start(self) -> None:
        """Serve in the background."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


def _handler_for(stats: Callable[[], EmulatorStats]) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != STATS_PATH:
                self._send(HTTPStatus.NOT_FOUND, {"error": f"unknown path {self.path}; try {STATS_PATH}"})
                return
            self._send(HTTPStatus.OK, stats_json(stats()))

        def _send(self, status: HTTPStatus, body: dict) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            """Silence the default per-request stderr line; the emulator logs JSON elsewhere."""

    return _Handler
