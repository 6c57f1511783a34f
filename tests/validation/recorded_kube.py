"""A stand-in Kubernetes API server answering with recorded real-format JSON, for the official client.

Only a test double: each route maps (method, path) to a recorded response or to a function of the
request body; every request is recorded so tests can assert what the client sent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

Responder = Callable[[Any], tuple[int, Any]]


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any


class RecordedKubeApi:
    """Serve ``routes`` on 127.0.0.1 (a free port) until ``close``; ``api_client()`` talks to it."""

    def __init__(self, routes: dict[tuple[str, str], Any]) -> None:
        self.routes = routes
        self.requests: list[Request] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                url = urlsplit(self.path)
                path = unquote(url.path)  # as the API server does: pods/name%3A8080 is pods/name:8080
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                outer.requests.append(Request(self.command, path, parse_qs(url.query), body))
                route = outer.routes.get((self.command, path))
                if route is None:
                    status, answer = 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                           "reason": "NotFound", "code": 404, "message": f"{path} not found"}
                elif callable(route):
                    status, answer = route(body)
                else:
                    status, answer = 200, route
                payload = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PUT = do_PATCH = do_POST = do_DELETE = _serve

            def log_message(self, *args: object) -> None:
                """Quiet: the test asserts on ``requests`` instead."""

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def api_client(self) -> Any:
        """An official ``kubernetes.client.ApiClient`` pointed at this server."""
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.url
        return client.ApiClient(configuration)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
