"""The API's HTTP server wakes when told to exit, not ten times a second to look."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from runtime.scheduler.http_server import QuietServer
from tests.runtime.scheduler.platform import wait_for

# Far longer than any test: a wake-up of the loop in a test comes from an exit request, never the clock.
NEVER_S = 3600.0
# Bounds on waits that end as soon as what they wait for happens.
WAIT_S = 30.0
# uvicorn's own loop ticks every 0.1 s; a quiet loop must not tick again within ten of those.
QUIET_WINDOW_S = 1.0


async def _app(scope: dict, receive, send) -> None:  # type: ignore[no-untyped-def]
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


class CountingServer(QuietServer):
    """Counts the loop's ticks; ``ticked_again`` is set on the tick after the first."""

    def __init__(self, config: uvicorn.Config, tick_s: float) -> None:
        super().__init__(config, tick_s)
        self.ticks = 0
        self.ticked_again = threading.Event()

    async def on_tick(self, counter: int) -> bool:
        self.ticks += 1
        if self.ticks > 1:
            self.ticked_again.set()
        return await super().on_tick(counter)


@pytest.fixture
def server() -> Iterator[CountingServer]:
    config = uvicorn.Config(_app, host="127.0.0.1", port=0, log_config=None, access_log=False, lifespan="off")
    started = CountingServer(config, tick_s=NEVER_S)
    thread = threading.Thread(target=started.run, name="test-http-server", daemon=True)
    thread.start()
    try:
        wait_for(lambda: started.started, WAIT_S, "the server's start")
        yield started
    finally:
        started.should_exit = True
        thread.join(WAIT_S)
        assert not thread.is_alive(), "the server did not stop"


def _port(server: uvicorn.Server) -> int:
    return int(server.servers[0].sockets[0].getsockname()[1])


def test_it_serves_with_a_date_header_and_does_not_tick_while_it_waits(server: CountingServer) -> None:
    response = httpx.get(f"http://127.0.0.1:{_port(server)}/", timeout=WAIT_S)
    assert response.status_code == 200 and response.text == "ok"
    assert response.headers["date"].endswith(" GMT")  # the header uvicorn's tick fills in
    # uvicorn's own main loop would have ticked about ten times by now.
    assert not server.ticked_again.wait(QUIET_WINDOW_S)


def test_an_exit_request_from_another_thread_wakes_it_at_once(server: CountingServer) -> None:
    server.should_exit = True
    assert server.ticked_again.wait(WAIT_S)  # far sooner than its hour-long tick


def test_a_shutdown_signal_wakes_it_at_once(server: CountingServer) -> None:
    server.handle_exit(signal.SIGTERM, None)  # what uvicorn's signal handler calls
    assert server.ticked_again.wait(WAIT_S)
