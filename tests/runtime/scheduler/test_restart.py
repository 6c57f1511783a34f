"""The scheduler as a process (``python -m runtime.scheduler``), killed mid-job and started again."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from kernels.version import KERNEL_VERSION
from runtime.local.broker import EmulatorHandle, start_emulator
from runtime.protocol import contract
from runtime.protocol.messages import JobStatus
from tests.runtime.scheduler.platform import Requests, ResultListener, create_topology, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(180)]

PROJECT = "sched-restart"
START_TIMEOUT_S = 90.0


@pytest.fixture
def emulator() -> Iterator[EmulatorHandle]:
    # Leases at real time: the client extends each one to 10 s when it receives the message (its histogram's
    # minimum), so a killed scheduler's messages come back within 10 s. A scaled lease would lapse under a live
    # client's own lease extensions (runtime/local/broker/clock.py) and spend delivery attempts on the way.
    handle = start_emulator("127.0.0.1", 0)
    create_topology(handle.address, PROJECT)
    yield handle
    handle.stop()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(env: dict[str, str], log: Path, cwd: Path | None = None) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "runtime.scheduler"], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd)


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def _scheduler(emulator: EmulatorHandle, tmp_path: Path) -> tuple[dict[str, str], httpx.Client, Callable[[], bool]]:
    """The environment of a scheduler process on ``emulator`` with its store under ``tmp_path``, an API client
    for it, and its readiness check."""
    port = _free_port()
    env = {**os.environ, "PUBSUB_EMULATOR_HOST": emulator.address, "GPURT_PROJECT": PROJECT,
           "GPURT_PORT": str(port), "GPURT_LOCAL_WORKERS": "1", "GPURT_CONTROL_TOKEN": "t",
           "GPURT_RESULT_STORE": (tmp_path / "results").as_uri(), "GPURT_DEVICE": "cpu"}
    api = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5, headers={"Authorization": "Bearer t"})

    def ready() -> bool:
        try:
            return api.get(contract.READY_PATH).status_code == 200
        except httpx.HTTPError:
            return False

    return env, api, ready


def test_killed_mid_job_gives_one_result_and_sigterm_drains(emulator: EmulatorHandle, tmp_path: Path) -> None:
    env, api, ready = _scheduler(emulator, tmp_path)
    results, requests = ResultListener(emulator.address, PROJECT), Requests(emulator.address, PROJECT)
    first = _start(env, tmp_path / "first.log")
    second = None
    try:
        wait_for(ready, START_TIMEOUT_S, "the first scheduler")
        requests.job("restart-1", sleep_s=3)
        wait_for(lambda: api.get("/jobs/restart-1").json().get("state") == "running", 30, "restart-1 running")
        _kill(first)
        second = _start(env, tmp_path / "second.log")
        wait_for(ready, START_TIMEOUT_S, "the second scheduler")
        result = results.wait("restart-1", timeout_s=60)
        assert result.status is JobStatus.SUCCEEDED and result.attempt >= 2
        requests.job("restart-marker")  # once this is through, a second restart-1 result would have shown
        results.wait("restart-marker", timeout_s=30)
        assert len(results.of("restart-1")) == 1

        # SIGTERM (a rollout) drains: the in-flight job finishes and is acked before the process ends.
        requests.job("sigterm-1", sleep_s=2)
        wait_for(lambda: api.get("/jobs/sigterm-1").json().get("state") == "running", 30, "sigterm-1 running")
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
        finished = results.wait("sigterm-1", timeout_s=5)
        assert finished.status is JobStatus.SUCCEEDED and finished.attempt == 1
    finally:
        for proc in (first, second):
            if proc is not None:
                _kill(proc)
        requests.close()
        results.close()
        api.close()


@pytest.mark.timeout(600)
def test_a_build_with_edited_kernels_never_takes_the_old_builds_cached_result(emulator: EmulatorHandle,
                                                                                tmp_path: Path) -> None:
    """docs/scheduler.md, "Result cache": a deploy that changes the kernels misses every result of the old ones.

    The second scheduler runs, on the same store and topics, from a copy of the source whose kernels differ by
    one comment line: its kernel version is another, so the computation the first one ran runs again, and a
    repeat on the new build is then answered from the new build's result.
    """
    root = Path(__file__).resolve().parents[3]
    edited = tmp_path / "edited-build"
    for package in ("kernels", "runtime"):
        shutil.copytree(root / package, edited / package, ignore=shutil.ignore_patterns("__pycache__"))
    with (edited / "kernels" / "european.py").open("a") as source:
        source.write("\n# an edit: nothing the numbers see, yet another kernel version\n")
    env, api, ready = _scheduler(emulator, tmp_path)
    results, requests = ResultListener(emulator.address, PROJECT), Requests(emulator.address, PROJECT)
    params = {"paths": 2000, "seed": 4515}
    first = second = None
    try:
        first = _start(env, tmp_path / "first.log")
        wait_for(ready, START_TIMEOUT_S, "the first scheduler")
        requests.job("kv-old-build", "european_option", **params)
        old = results.wait("kv-old-build", timeout_s=240)  # may compile the kernel
        assert old.status is JobStatus.SUCCEEDED and old.kernel_version == KERNEL_VERSION, old.error
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)

        # PYTHONPATH first: the editable install of this checkout is on every interpreter's path too.
        second = _start({**env, "PYTHONPATH": str(edited)}, tmp_path / "second.log", cwd=edited)
        wait_for(ready, START_TIMEOUT_S, "the scheduler of the edited build")
        requests.job("kv-new-build", "european_option", **params)
        new = results.wait("kv-new-build", timeout_s=240)  # compiles the edited kernel
        assert new.status is JobStatus.SUCCEEDED and not new.cached, new.error
        assert new.kernel_version not in (None, KERNEL_VERSION)
        requests.job("kv-repeat", "european_option", **params)
        repeat = results.wait("kv-repeat", timeout_s=60)
        assert repeat.cached and repeat.cached_from == "kv-new-build"
    finally:
        for proc in (first, second):
            if proc is not None:
                _kill(proc)
        requests.close()
        results.close()
        api.close()
