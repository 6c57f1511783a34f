"""The gpu-scheduler's entry point holds its API port before the service starts anything.

Locally the service starts a Dask scheduler process and workers, which bind ports the kernel picks; a
restarted replica's API port, just freed, could be one of them, and the replica would then fail to listen
while the platform's readiness probe spoke HTTP to a Dask process.
"""

from __future__ import annotations

import socket
from typing import ClassVar

import pytest

from runtime.local.processes import free_ports, port_in_use
from runtime.protocol.contract import SchedulerEnv
from runtime.scheduler import __main__ as entry
from runtime.scheduler.settings import Settings

HOST = "127.0.0.1"


class _Service:
    """Records whether the API port was listening when the service started."""

    started_with_port_held: ClassVar[list[bool]] = []
    port = 0

    def __init__(self, settings: Settings) -> None:
        pass

    def start(self) -> None:
        self.started_with_port_held.append(port_in_use(HOST, self.port))

    def stop(self, timeout_s: float = 0.0) -> None:
        pass


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> type[_Service]:
    from runtime.scheduler import api, http_server, logs, service

    class Service(_Service):
        started_with_port_held: ClassVar[list[bool]] = []
        port = free_ports(HOST, 1)[0]

    monkeypatch.setattr(service, "Service", Service)
    monkeypatch.setattr(api, "create_app", lambda *args, **kwargs: None)
    # Serves nothing, returns at once, as a server that started and was stopped.
    monkeypatch.setattr(http_server.QuietServer, "run", lambda self, sockets=None: setattr(self, "started", True))
    monkeypatch.setattr(logs, "configure", lambda level, max_bytes=None: None)  # leaves the test run's logging alone
    monkeypatch.setenv(SchedulerEnv.HOST, HOST)
    monkeypatch.setenv(SchedulerEnv.PORT, str(Service.port))
    return Service


def test_the_api_port_listens_before_the_service_starts(stubbed: type[_Service]) -> None:
    assert entry.main() == 0
    assert stubbed.started_with_port_held == [True]


def test_a_taken_api_port_ends_the_start_before_the_service_starts_anything(stubbed: type[_Service]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind((HOST, stubbed.port))
        taken.listen()
        assert entry.main() == entry.UVICORN_STARTUP_FAILURE
    assert stubbed.started_with_port_held == []
