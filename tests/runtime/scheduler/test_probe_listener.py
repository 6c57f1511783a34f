"""The kubelet's probes under a connection flood, on a real server as ``python -m runtime.scheduler`` runs it.

The API's socket and the probes' socket are served by one ``QuietServer`` on loopback (the service is not
started: the probes answer from it as it is). A ``ConnectionFlood`` (the chaos drill's) holds the API full of
silent connections and reopens each one the server closes. The API must keep its cap (it refuses a health
check on its own port) while every probe on the probes' port is answered within the kubelet's timeout: where
the probes shared the API's cap, this flood failed them all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import uvicorn

from runtime.manifests.scheduler import PROBE_TIMEOUT_S
from runtime.protocol import contract
from runtime.scheduler import http_limits
from runtime.scheduler.api import create_app, create_probe_app
from runtime.scheduler.http_server import QuietServer
from runtime.scheduler.probe_listener import ProbeListener, listen
from runtime.scheduler.service import Service
from runtime.scheduler.settings import Settings
from tests.runtime.scheduler.platform import wait_for
from validation.drills.flood import ConnectionFlood, probe

pytestmark = pytest.mark.timeout(60)

SMALL_CAP = 16  # the API's connection cap here: the flood fills it in milliseconds
EXTRA = 8  # flood connections past the cap, closed by the server at once and reopened
FLOOD_S = 3.0  # how long the probes are asked under the flood
PROBE_EVERY_S = 0.1
START_WAIT_S = 30.0


@dataclass(frozen=True)
class Ports:
    api: int
    probes: int


@pytest.fixture
def ports(monkeypatch: pytest.MonkeyPatch) -> Iterator[Ports]:
    """The API and the probes' listener on free loopback ports, as ``runtime.scheduler.__main__`` wires them."""
    monkeypatch.setattr(http_limits, "MAX_CONNECTIONS", SMALL_CAP)
    service = Service(
        Settings.from_env(
            {"GPURT_RESULT_STORE": "memory://probe-listener", contract.SchedulerEnv.CONTROL_TOKEN: "token"}
        )
    )
    config = uvicorn.Config(
        create_app(service), host="127.0.0.1", port=0, log_config=None, access_log=False, **http_limits.server_options()
    )
    api_socket = listen("127.0.0.1", 0, config.backlog)
    probes = ProbeListener(create_probe_app(service), listen("127.0.0.1", 0, config.backlog))
    server = QuietServer(config, probes=probes)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [api_socket]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, START_WAIT_S, "the HTTP server")
    yield Ports(api=api_socket.getsockname()[1], probes=probes.port)
    server.should_exit = True
    thread.join(timeout=10)
    assert not thread.is_alive()


def _url(port: int, path: str) -> str:
    return f"http://127.0.0.1:{port}{path}"


def test_the_probes_answer_while_the_apis_connections_are_flooded(ports: Ports) -> None:
    health, ready = (_url(ports.probes, path) for path in (contract.HEALTH_PATH, contract.READY_PATH))
    api_health = _url(ports.api, contract.HEALTH_PATH)
    assert probe(api_health) == 200 and probe(health) == 200  # both answer before the flood
    live: list[int | None] = []
    readiness: list[int | None] = []
    api: list[int | None] = []
    with ConnectionFlood("127.0.0.1", ports.api, SMALL_CAP + EXTRA) as flood:
        wait_for(lambda: flood.closed_by_server > 0, START_WAIT_S, "the flood to fill the API's cap")
        end = time.monotonic() + FLOOD_S
        while time.monotonic() < end:
            live.append(probe(health, PROBE_TIMEOUT_S))
            readiness.append(probe(ready, PROBE_TIMEOUT_S))
            api.append(probe(api_health, PROBE_TIMEOUT_S))
            time.sleep(PROBE_EVERY_S)  # the probes' pace, not a wait for a condition
    assert flood.opened > SMALL_CAP + EXTRA  # connections were closed and reopened: the flood reconnects
    assert live and set(live) == {200}, live
    # Not started, the service is not ready: an answer all the same, which is what the kubelet needs.
    assert set(readiness) == {503}, readiness
    assert set(api) == {None}, api  # the cap holds: the API itself refused everyone while it was full
    wait_for(lambda: probe(api_health) == 200, START_WAIT_S, "the API to answer again after the flood")


def test_the_probes_listener_serves_nothing_but_the_probes(ports: Ports) -> None:
    assert probe(_url(ports.probes, "/status")) == 404
    assert probe(_url(ports.probes, contract.METRICS_PATH)) == 404
    assert probe(_url(ports.probes, "/openapi.json")) == 404


def test_the_probes_answer_while_their_own_port_is_flooded(ports: Ports) -> None:
    # A flood of the probes' own port, past their cap: the flood fills it, yet every probe (whose request is in
    # the socket when the server takes the connection) gets in by closing an old silent connection.
    health = _url(ports.probes, contract.HEALTH_PATH)
    live: list[int | None] = []
    with ConnectionFlood("127.0.0.1", ports.probes, http_limits.PROBE_MAX_CONNECTIONS + 2 * EXTRA) as flood:
        wait_for(lambda: flood.closed_by_server > 0, START_WAIT_S, "the flood to fill the probes' cap")
        end = time.monotonic() + FLOOD_S
        while time.monotonic() < end:
            live.append(probe(health, PROBE_TIMEOUT_S))
            time.sleep(PROBE_EVERY_S)  # the probes' pace, not a wait for a condition
    assert flood.opened > http_limits.PROBE_MAX_CONNECTIONS + 2 * EXTRA  # the server closed silent ones: it was full
    assert live and set(live) == {200}, live
