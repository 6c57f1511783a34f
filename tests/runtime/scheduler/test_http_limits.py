"""What one HTTP client may cost a replica, on a real uvicorn server with the scheduler's own settings.

Raw sockets play the hostile clients: one that announces a huge body and sends only its head, one that
sends a body past the cap in chunks, one that sends nothing, one that trickles its body, and more
connections than the cap. Each must get its answer (or lose its connection) from the server within the
bound, without the server waiting for bytes that never come. The service is not started: the API
answers from the request alone.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from runtime.protocol import contract
from runtime.scheduler import http_limits
from runtime.scheduler.api import create_app
from runtime.scheduler.service import Service
from runtime.scheduler.settings import Settings
from tests.runtime.scheduler.platform import wait_for

pytestmark = pytest.mark.timeout(60)

TOKEN = "right-token"
# How long a test waits for the server's answer. Far above the (shortened) limits below, and far below the
# time a server that waits for the announced body would need: it never comes.
ANSWER_WAIT_S = 10.0
SHORT_TIMEOUT_S = 0.5  # the header and body deadlines, shortened so a test takes a second
SMALL_CAP = 4  # connections, in the connection-cap test


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A uvicorn server as ``python -m runtime.scheduler`` runs it (short deadlines); yields its port."""
    import uvicorn

    monkeypatch.setattr(http_limits, "HEADER_TIMEOUT_S", SHORT_TIMEOUT_S)
    monkeypatch.setattr(http_limits, "BODY_TIMEOUT_S", SHORT_TIMEOUT_S)
    monkeypatch.setattr(http_limits, "MAX_CONNECTIONS", SMALL_CAP)
    service = Service(Settings.from_env({"GPURT_RESULT_STORE": "memory://http-limits",
                                         contract.SchedulerEnv.CONTROL_TOKEN: TOKEN}))
    server = uvicorn.Server(uvicorn.Config(create_app(service), host="127.0.0.1", port=0, log_config=None,
                                           **http_limits.server_options()))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, 30, "the HTTP server")
    yield server.servers[0].sockets[0].getsockname()[1]
    server.should_exit = True
    thread.join(timeout=10)


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=ANSWER_WAIT_S)
    return sock


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (or ANSWER_WAIT_S passes: a failure)."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _head(path: str, length: int | None, token: str | None = None, extra: str = "") -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: scheduler", "Content-Type: application/json"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if token:
        lines.append(f"Authorization: Bearer {token}")
    return ("\r\n".join(lines) + "\r\n" + extra + "\r\n").encode()


def test_an_unauthenticated_huge_post_is_refused_from_its_head_without_its_body(server: int) -> None:
    with _connect(server) as sock:
        sock.sendall(_head("/control/maintenance", 128 * 1024 * 1024))  # and not one byte of the body
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]


def test_a_body_announced_over_the_cap_gets_413_before_it_is_sent(server: int) -> None:
    with _connect(server) as sock:
        sock.sendall(_head("/control/maintenance", http_limits.MAX_BODY_BYTES + 1, TOKEN))
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 413") and f"{http_limits.MAX_BODY_BYTES} bytes".encode() in answer


def test_a_chunked_body_over_the_cap_gets_413(server: int) -> None:
    chunk = b"x" * 4096
    with _connect(server) as sock:
        sock.sendall(_head("/control/maintenance", None, TOKEN, "Transfer-Encoding: chunked\r\n"))
        try:
            for _ in range(http_limits.MAX_BODY_BYTES // len(chunk) + 2):
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed while the rest was still on its way
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_a_connection_that_sends_no_request_head_is_closed_after_the_header_timeout(server: int) -> None:
    with _connect(server) as silent, _connect(server) as partial:
        partial.sendall(b"GET /healthz HTTP/1.1\r\nHost: sched")  # and never the rest
        assert _answer(silent) == b"" and _answer(partial) == b""  # closed by the server, not timed out here


def test_a_body_that_trickles_past_the_body_timeout_gets_408(server: int) -> None:
    with _connect(server) as sock:
        sock.sendall(_head("/control/maintenance", 100, TOKEN) + b'{"mode": ')  # 9 of 100 bytes, then nothing
        answer = _answer(sock)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]


def test_connections_past_the_cap_are_closed_at_once_and_the_api_answers_again_after(server: int) -> None:
    held = [_connect(server) for _ in range(SMALL_CAP)]
    try:
        with _connect(server) as extra:
            assert _answer(extra) == b""
    finally:
        for sock in held:
            sock.close()
    wait_for(lambda: _healthz(server).startswith(b"HTTP/1.1 200"), ANSWER_WAIT_S, "the API after the flood")


def _healthz(port: int) -> bytes:
    with _connect(port) as sock:
        sock.sendall(f"GET {contract.HEALTH_PATH} HTTP/1.1\r\nHost: s\r\nConnection: close\r\n\r\n".encode())
        return _answer(sock)


def test_refused_connections_are_logged_once_per_interval_with_their_count() -> None:
    # A flood logged one line per refused connection (265,407 lines in 96 s); now one line per interval.
    import logging

    from runtime.scheduler.logs import Throttled

    now = [0.0]
    throttle = Throttled(10.0, clock=lambda: now[0])
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("test-throttle")
    logger.addHandler(Keep())
    logger.propagate = False
    for i in range(1000):  # 1,000 refusals in 10 s
        now[0] = i * 0.01
        throttle.warning(logger, "closed connections past the cap of %d open ones", 128)
    now[0] = 10.0
    throttle.warning(logger, "closed connections past the cap of %d open ones", 128)

    assert records == ["closed connections past the cap of 128 open ones",
                       "closed connections past the cap of 128 open ones (1000 times in the last 10 s)"]


def test_a_flood_of_refused_connections_logs_a_line_per_interval_not_per_connection(
        server: int, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime.scheduler.logs import Throttled

    # a fresh throttle: an earlier test's refusals must not hold back this one's first line
    monkeypatch.setattr(http_limits, "_REFUSED", Throttled(http_limits.LOG_EVERY_S), raising=False)
    refused = 50
    held = [_connect(server) for _ in range(SMALL_CAP)]
    try:
        for _ in range(refused):
            with _connect(server) as extra:
                assert _answer(extra) == b""
    finally:
        for sock in held:
            sock.close()
    lines = [r for r in caplog.records if "past the cap" in r.getMessage() or "are open, the limit" in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]
