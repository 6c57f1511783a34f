"""Vertex AI overflow end to end: the scheduler as a process (one local Dask worker, a 2 s spill budget), the local
stand-in of the custom-jobs API running each custom job's ``runtime.worker.vertex_task`` as a process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from runtime.local.broker import EmulatorHandle, start_emulator
from runtime.local.vertex_api import VertexApiHandle, start_vertex_api
from runtime.protocol import contract
from runtime.protocol.messages import ErrorKind, JobStatus
from tests.runtime.scheduler.platform import Requests, ResultListener, create_topology, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]

PROJECT = "sched-overflow"
SPILL_AFTER_S = 2.0
START_TIMEOUT_S = 90.0
PARENT = f"projects/{PROJECT}/locations/us-central1"


class Scheduler:
    """The gpu-scheduler process, restartable; its HTTP API."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self._env = env
        self._logs = logs
        self._starts = 0
        self.api = httpx.Client(base_url=f"http://127.0.0.1:{env['GPURT_PORT']}", timeout=5,
                                headers={"Authorization": f"Bearer {env['GPURT_CONTROL_TOKEN']}"})
        self._proc = self._start()

    def _start(self) -> subprocess.Popen:
        self._starts += 1
        with open(self._logs / f"scheduler-{self._starts}.log", "ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "runtime.scheduler"], env=self._env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(self._ready, START_TIMEOUT_S, "the scheduler")
        return proc

    def _ready(self) -> bool:
        try:
            return self.api.get(contract.READY_PATH).status_code == 200
        except httpx.HTTPError:
            return False

    def restart(self) -> None:
        """Kill the process (SIGKILL, no drain) and start a new one."""
        self.kill()
        self._proc = self._start()

    def kill(self) -> None:
        """SIGKILL the process group."""
        if self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait(timeout=30)


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorHandle]:
    handle = start_emulator("127.0.0.1", 0)  # leases at real time: see test_restart.py's emulator
    create_topology(handle.address, PROJECT)
    yield handle
    handle.stop()


TOKEN = "t"


@pytest.fixture(scope="module")
def result_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return tmp_path_factory.mktemp("results").as_uri()


@pytest.fixture(scope="module")
def vertex(tmp_path_factory: pytest.TempPathFactory, result_store: str) -> Iterator[VertexApiHandle]:
    handle = start_vertex_api("127.0.0.1", 0, tmp_path_factory.mktemp("custom-jobs"), token=TOKEN,
                              result_store=result_store)
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def scheduler(emulator: EmulatorHandle, vertex: VertexApiHandle, result_store: str,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scheduler]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PUBSUB_EMULATOR_HOST": emulator.address, "GPURT_PROJECT": PROJECT,
           "GPURT_PORT": str(port), "GPURT_LOCAL_WORKERS": "1", "GPURT_CONTROL_TOKEN": TOKEN,
           "GPURT_RESULT_STORE": result_store, "GPURT_DEVICE": "cpu",
           contract.SchedulerEnv.VERTEX_ENDPOINT: vertex.url, contract.SchedulerEnv.VERTEX_IMAGE: "local",
           contract.SchedulerEnv.VERTEX_SPILL_AFTER_S: str(SPILL_AFTER_S),
           contract.SchedulerEnv.VERTEX_POLL_S: "0.2"}
    process = Scheduler(env, tmp_path_factory.mktemp("logs"))
    yield process
    process.kill()
    process.api.close()


@pytest.fixture(scope="module")
def results(emulator: EmulatorHandle) -> Iterator[ResultListener]:
    listener = ResultListener(emulator.address, PROJECT)
    yield listener
    listener.close()


@pytest.fixture(scope="module")
def requests(emulator: EmulatorHandle) -> Iterator[Requests]:
    publisher = Requests(emulator.address, PROJECT)
    yield publisher
    publisher.close()


def _custom_job(vertex: VertexApiHandle, job_id: str) -> dict | None:
    jobs = vertex.jobs.list(PARENT, f'display_name="{contract.VERTEX_JOB_PREFIX}{job_id}"', 10)
    return jobs[0] if jobs else None


def test_a_job_waiting_past_the_budget_runs_on_vertex_ai_and_says_so(
        scheduler: Scheduler, vertex: VertexApiHandle, requests: Requests, results: ResultListener) -> None:
    requests.job("busy-1", sleep_s=8)
    requests.job("spilled-1", sleep_s=0.5)
    spilled = results.wait("spilled-1", timeout_s=60)
    assert spilled.status is JobStatus.SUCCEEDED
    assert spilled.metrics.backend == "vertex"
    assert spilled.metrics.spilled_after_s is not None and spilled.metrics.spilled_after_s >= SPILL_AFTER_S
    custom = _custom_job(vertex, "spilled-1")
    assert custom is not None and custom["state"] == "JOB_STATE_SUCCEEDED"
    busy = results.wait("busy-1", timeout_s=60)
    assert busy.status is JobStatus.SUCCEEDED
    assert busy.metrics.backend == "dask" and busy.metrics.spilled_after_s is None
    assert _custom_job(vertex, "busy-1") is None  # the job that found a worker never went to Vertex AI
    metrics = scheduler.api.get("/metrics").text
    assert f'{contract.METRICS.job_spills_total}{{type="noop"}} 1.0' in metrics


def test_cancel_of_a_spilled_job_cancels_its_custom_job(
        scheduler: Scheduler, vertex: VertexApiHandle, requests: Requests, results: ResultListener) -> None:
    requests.job("busy-2", sleep_s=6)
    requests.job("spilled-2", sleep_s=60)
    wait_for(lambda: (_custom_job(vertex, "spilled-2") or {}).get("state") == "JOB_STATE_RUNNING", 30,
             "spilled-2's custom job")
    overflow = scheduler.api.get("/status").json()["overflow"]
    assert overflow == {"spill_after_s": SPILL_AFTER_S, "pinned_types": [], "on_vertex": ["spilled-2"]}
    assert scheduler.api.delete("/jobs/spilled-2").status_code == 202
    cancelled = results.wait("spilled-2", timeout_s=30)
    assert cancelled.status is JobStatus.CANCELLED
    wait_for(lambda: _custom_job(vertex, "spilled-2")["state"] == "JOB_STATE_CANCELLED", 10, "the custom job ended")
    assert results.wait("busy-2", timeout_s=30).status is JobStatus.SUCCEEDED


def test_a_failed_custom_job_fails_the_job_with_its_own_error(
        scheduler: Scheduler, vertex: VertexApiHandle, requests: Requests, results: ResultListener) -> None:
    requests.job("busy-3", sleep_s=6)
    requests.job("spilled-3", fail="permanent")
    failed = results.wait("spilled-3", timeout_s=60)
    assert failed.status is JobStatus.FAILED
    assert failed.error is not None and failed.error.kind is ErrorKind.PERMANENT
    assert "simulated permanent failure" in failed.error.message
    assert _custom_job(vertex, "spilled-3")["state"] == "JOB_STATE_FAILED"
    assert results.wait("busy-3", timeout_s=30).status is JobStatus.SUCCEEDED


def test_a_scheduler_restart_while_a_custom_job_runs_gives_one_result(
        scheduler: Scheduler, vertex: VertexApiHandle, requests: Requests, results: ResultListener) -> None:
    requests.job("busy-4", sleep_s=6)
    requests.job("spilled-4", sleep_s=8)
    wait_for(lambda: (_custom_job(vertex, "spilled-4") or {}).get("state") == "JOB_STATE_RUNNING", 30,
             "spilled-4's custom job")
    scheduler.restart()
    result = results.wait("spilled-4", timeout_s=90)
    assert result.status is JobStatus.SUCCEEDED and result.attempt >= 2, (result.status, result.attempt, result.error)
    assert results.wait("busy-4", timeout_s=60).status is JobStatus.SUCCEEDED
    requests.job("after-restart")  # once this is through, a second spilled-4 result would have shown
    results.wait("after-restart", timeout_s=60)
    assert len(results.of("spilled-4")) == 1
