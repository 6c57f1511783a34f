"""``python -m runtime.local.prometheus.receiver``: the local on-call endpoint, recording Alertmanager's webhooks.

It stands where a pager would: Alertmanager POSTs each notification to ``/alerts/<receiver>`` and the
receiver appends it to the notification file. ``GET /healthz`` answers once it listens. A body that is
not a webhook payload gets a 400 with the reason, and its raw text is kept in the log, not lost.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from http import HTTPStatus
from pathlib import Path
from typing import Final

from pydantic import ValidationError

from runtime.access.alert_notifications import record
from runtime.local.http_thread import BackgroundHttpServer, ReplyHandler
from runtime.local.prometheus.config import RECEIVER_PATH
from runtime.local.stop_signal import StopSignal
from runtime.protocol.contract import HEALTH_PATH

MAX_BODY_BYTES: Final = 4 * 1024 * 1024  # Alertmanager's payloads are a few kB; anything huge is not one
log = logging.getLogger("gpurt.alert-receiver")
_WHERE_TO_POST: Final = {"error": f"POST notifications to {RECEIVER_PATH}/<receiver>"}


class Receiver(BackgroundHttpServer):
    """The webhook receiver's HTTP server; ``start``/``stop`` run it in a background thread."""

    def __init__(self, host: str, port: int, record_path: Path) -> None:
        lock = threading.Lock()  # one writer at a time: lines must not interleave
        super().__init__(host, port, _handler_for(record_path, lock), "alert-receiver")


def _handler_for(record_path: Path, lock: threading.Lock) -> type[ReplyHandler]:
    class _Handler(ReplyHandler):
        def do_GET(self) -> None:
            if self.path == HEALTH_PATH:
                self.reply_json(HTTPStatus.OK, {"status": "ok"})
            else:
                self.reply_json(HTTPStatus.NOT_FOUND, _WHERE_TO_POST)

        def do_POST(self) -> None:
            if not self.path.startswith(RECEIVER_PATH + "/"):
                self.reply_json(HTTPStatus.NOT_FOUND, _WHERE_TO_POST)
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                self.reply_json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": "body too large"})
                return
            body = self.rfile.read(length)
            try:
                with lock:
                    notification = record(record_path, self.path, body)
            except ValidationError as exc:
                log.error("not an Alertmanager webhook payload on %s (%s): %r", self.path,
                          exc.errors(include_url=False)[:3], body[:2000])
                self.reply_json(HTTPStatus.BAD_REQUEST, {"error": "not an Alertmanager webhook payload"})
                return
            log.info("%s notification on %s: %s", notification.payload.status, self.path,
                     ", ".join(f"{a.name}={a.status}" for a in notification.payload.alerts))
            self.reply_json(HTTPStatus.OK, {"status": "recorded"})

    return _Handler


def main(argv: list[str] | None = None) -> int:
    """Run until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m runtime.local.prometheus.receiver",
                                     description="Records Alertmanager webhook notifications")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--record", type=Path, required=True, help="JSON-lines file the notifications go to")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    args.record.parent.mkdir(parents=True, exist_ok=True)
    receiver = Receiver(args.host, args.port, args.record)
    stop = StopSignal()
    receiver.start()
    log.info("recording notifications to %s on %s:%d", args.record, args.host, receiver.port)
    stop.wait()
    receiver.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
