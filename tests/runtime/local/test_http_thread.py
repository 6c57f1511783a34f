"""The local platform's small HTTP servers: one way to answer (``ReplyHandler``), and the alert receiver on it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from http import HTTPStatus
from pathlib import Path

import pytest

from runtime.access.alert_notifications import read_log
from runtime.local.http_thread import BackgroundHttpServer, ReplyHandler
from runtime.local.prometheus.receiver import Receiver
from runtime.protocol.contract import HEALTH_PATH


class _Echo(ReplyHandler):
    def do_GET(self) -> None:
        if self.path == "/json":
            self.reply_json(HTTPStatus.OK, {"path": self.path, "n": [1, 2]})
        else:
            self.reply(HTTPStatus.IM_A_TEAPOT, b"short and stout", "text/plain; charset=utf-8")


def _get(url: str, data: bytes | None = None) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.headers["Content-Type"], exc.read()


@pytest.fixture
def echo() -> Iterator[str]:
    server = BackgroundHttpServer("127.0.0.1", 0, _Echo, "test-echo")
    server.start()
    yield f"http://127.0.0.1:{server.port}"
    server.stop()


def test_a_json_reply_has_its_type_and_length_and_parses(echo: str) -> None:
    status, content_type, body = _get(f"{echo}/json")
    assert (status, content_type) == (200, "application/json")
    assert json.loads(body) == {"path": "/json", "n": [1, 2]}


def test_a_reply_of_bytes_keeps_its_status_and_type_and_no_request_is_logged(
        echo: str, capfd: pytest.CaptureFixture[str]) -> None:
    assert _get(f"{echo}/other") == (418, "text/plain; charset=utf-8", b"short and stout")
    assert capfd.readouterr().err == ""  # the standard library would print an access line per request


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    record = tmp_path / "notifications.jsonl"
    server = Receiver("127.0.0.1", 0, record)
    server.start()
    yield f"http://127.0.0.1:{server.port}", record
    server.stop()


def test_the_receiver_answers_health_and_names_where_to_post(receiver: tuple[str, Path]) -> None:
    url, _ = receiver
    status, _, body = _get(f"{url}{HEALTH_PATH}")
    assert (status, json.loads(body)) == (200, {"status": "ok"})
    status, _, body = _get(f"{url}/elsewhere", data=b"{}")
    assert status == 404 and json.loads(body) == {"error": "POST notifications to /alerts/<receiver>"}


def test_the_receiver_records_a_webhook_and_refuses_what_is_not_one(receiver: tuple[str, Path]) -> None:
    url, record = receiver
    status, _, body = _get(f"{url}/alerts/page", data=b'{"not": "a webhook"}')
    assert status == 400 and json.loads(body) == {"error": "not an Alertmanager webhook payload"}
    payload = {"receiver": "page", "status": "firing",
               "alerts": [{"status": "firing", "labels": {"alertname": "X"}, "startsAt": "2026-01-01T00:00:00Z"}]}
    status, _, body = _get(f"{url}/alerts/page", data=json.dumps(payload).encode())
    assert (status, json.loads(body)) == (200, {"status": "recorded"})
    [notification] = read_log(record).notifications
    [alert] = notification.payload.alerts
    assert (notification.path, alert.name, alert.status) == ("/alerts/page", "X", "firing")

