"""One emulator and one running scheduler (LocalCluster, 2 workers, HTTP on a free loopback port) per session."""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from runtime.local.broker import EmulatorHandle, start_emulator
from runtime.protocol import queues
from runtime.protocol.contract import SchedulerEnv
from runtime.scheduler.metrics import SchedulerMetrics
from runtime.scheduler.service import Service
from runtime.scheduler.settings import Settings
from tests.runtime.scheduler.platform import (
    TEST_QUEUES,
    Api,
    Requests,
    ResultListener,
    ScriptedBackend,
    create_topology,
    wait_for,
)

SERVER_START_TIMEOUT_S = 60.0


@dataclass
class Platform:
    emulator: EmulatorHandle
    project: str
    service: Service
    backend: ScriptedBackend
    results: ResultListener
    requests: Requests
    api: Api
    token: str


# Package-scoped, not session: torn down once this package's tests are done instead of idling (its Dask workers
# heartbeating) until the run ends. The modules using ``platform`` share one worker (ON_THE_PACKAGE_PLATFORM).
@pytest.fixture(scope="package")
def emulator() -> Iterator[EmulatorHandle]:
    handle = start_emulator("127.0.0.1", 0, admin_port=0)
    yield handle
    handle.stop()


@pytest.fixture(scope="package")
def platform(emulator: EmulatorHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    import uvicorn

    from runtime.scheduler.api import create_app
    from runtime.scheduler.http_limits import server_options

    project = "sched-it"
    create_topology(emulator.address, project)
    token = secrets.token_urlsafe(16)
    settings = Settings.from_env({
        "PUBSUB_EMULATOR_HOST": emulator.address, "GPURT_PROJECT": project, "GPURT_LOCAL_WORKERS": "2",
        "GPURT_RESULT_STORE": tmp_path_factory.mktemp("results").as_uri(), "GPURT_CONTROL_TOKEN": token,
        "GPURT_EMULATOR_ADMIN_URL": f"http://127.0.0.1:{emulator.admin_port}", "GPURT_DEVICE": "cpu",
        SchedulerEnv.WARM_WORKERS: os.environ[SchedulerEnv.WARM_WORKERS],  # as every test platform (tests/conftest.py)
        SchedulerEnv.QUEUES: queues.encode(TEST_QUEUES),
    })
    wrapped: list[ScriptedBackend] = []

    def wrap(inner):  # type: ignore[no-untyped-def]
        wrapped.append(ScriptedBackend(inner))
        return wrapped[0]

    service = Service(settings, metrics=SchedulerMetrics(), wrap_backend=wrap)
    service.start()
    server = uvicorn.Server(uvicorn.Config(create_app(service), host="127.0.0.1", port=0, log_config=None,
                                           **server_options()))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, SERVER_START_TIMEOUT_S, "the HTTP server")
    port = server.servers[0].sockets[0].getsockname()[1]
    results = ResultListener(emulator.address, project)
    requests = Requests(emulator.address, project)
    yield Platform(emulator, project, service, wrapped[0], results, requests,
                   Api(f"http://127.0.0.1:{port}", token), token)
    requests.close()
    results.close()
    server.should_exit = True
    thread.join(timeout=10)
    service.stop(timeout_s=10)
