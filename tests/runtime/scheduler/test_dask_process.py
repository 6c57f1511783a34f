"""The local Dask scheduler's own process: its environment, start-up errors, and that it never outlives the
gpu-scheduler (a normal stop, a signal to the process group, a SIGKILL of the parent alone)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import psutil
import pytest

from runtime.protocol import contract
from runtime.scheduler import dask_process
from runtime.scheduler.dask_process import DaskSchedulerProcess, child_env
from runtime.scheduler.local_cluster import start_local_cluster
from runtime.scheduler.settings import Settings

# Long enough for a Python process to start (or end) on a loaded machine; the waits return as soon as it does.
PROCESS_TIMEOUT_S = 60


def test_the_child_inherits_the_parents_config_and_not_its_dask_variables() -> None:
    config = {"distributed": {"admin": {"tick": {"interval": "500ms"}}}}
    env = child_env(config, {"PATH": "/bin", "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "20ms"})
    assert env["PATH"] == "/bin"
    assert "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL" not in env  # it would override the inherited config
    assert dask.config.collect_env(env)["distributed"] == config["distributed"]
    assert env[contract.MALLOC_MMAP_THRESHOLD_ENV] == str(contract.MALLOC_MMAP_THRESHOLD_BYTES)


def _settings(tmp_path: Path) -> Settings:
    return Settings.from_env({"GPURT_PROJECT": "p", "GPURT_DEVICE": "cpu", "GPURT_WARM_WORKERS": "false",
                              "GPURT_RESULT_STORE": (tmp_path / "results").as_uri(),
                              "GPURT_DASK_DASHBOARD": "127.0.0.1:0"})


def _gone(pid: int) -> bool:
    """Wait (bounded) for ``pid`` to end; True once it has."""
    try:
        psutil.Process(pid).wait(timeout=PROCESS_TIMEOUT_S)
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        return False
    return True


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Any]:
    started = start_local_cluster(_settings(tmp_path))
    try:
        yield started
    finally:
        started.close()


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_the_scheduler_process_ignores_the_groups_signals_and_ends_with_the_cluster(cluster: Any) -> None:
    from distributed import Client

    pid = cluster.scheduler.process.pid
    assert pid != os.getpid()
    assert psutil.Process(pid).parent().pid == os.getpid()
    # A Ctrl-C or `gpurt local down` signals the whole group; the gpu-scheduler drains, its Dask scheduler
    # must still answer (the kernel ends a process that does not ignore them before os.kill returns).
    for sig in (signal.SIGINT, signal.SIGTERM):
        os.kill(pid, sig)
    with Client(cluster, timeout="30s") as client:
        assert client.run_on_scheduler(os.getpid) == pid
    cluster.close()
    assert _gone(pid)


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_client_without_the_clusters_credentials_cannot_run_code_on_its_scheduler(cluster: Any) -> None:
    # Any process of the machine reaches the port; before TLS, Client(address).run_on_scheduler ran its code.
    from distributed import Client
    from distributed.security import Security

    address = cluster.scheduler_address
    plain = address.replace("tls://", "tcp://")
    # Plain TCP to the port, as before; TLS with credentials of its own (a certificate the cluster's CA did not sign).
    for target, security in ((plain, None), (address, Security.temporary())):
        with pytest.raises((OSError, TimeoutError)), Client(target, timeout="3s", security=security) as client:
            client.run_on_scheduler(os.getpid)
    assert address.startswith("tls://127.0.0.1:")
    # The platform's own client, with the cluster's credentials, still can.
    with Client(cluster, timeout="30s") as client:
        assert client.run_on_scheduler(os.getpid) == cluster.scheduler.process.pid
    folder = Path(cluster.security.tls_ca_file).parent
    assert folder.stat().st_mode & 0o777 == 0o700
    assert {path.name: path.stat().st_mode & 0o777 for path in folder.iterdir()} == {
        "dask-cert.pem": 0o600, "dask-key.pem": 0o600}
    # The Dask scheduler process was given the files' names, never the key itself.
    command = " ".join(psutil.Process(cluster.scheduler.process.pid).cmdline())
    assert "PRIVATE KEY" not in command and str(folder) in command


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_scheduler_process_that_dies_at_start_up_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        async def start() -> None:
            await DaskSchedulerProcess({"host": "127.0.0.1", "port": port, "dashboard": False})

        with pytest.raises(RuntimeError, match="Dask scheduler process exited with code 1 at start-up"):
            asyncio.run(start())


# The gpu-scheduler's part, in a process of its own: start the local cluster, say the Dask scheduler's pid,
# wait to be killed.
PARENT = """
import json, sys
from runtime.scheduler.local_cluster import start_local_cluster
from runtime.scheduler.settings import Settings

if __name__ == "__main__":
    cluster = start_local_cluster(Settings.from_env(json.loads(sys.argv[1])))
    print(cluster.scheduler.process.pid, flush=True)
    sys.stdin.read()
"""


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_the_scheduler_process_does_not_outlive_a_sigkilled_gpu_scheduler(tmp_path: Path) -> None:
    env = {"GPURT_PROJECT": "p", "GPURT_DEVICE": "cpu", "GPURT_WARM_WORKERS": "false",
           "GPURT_RESULT_STORE": (tmp_path / "results").as_uri()}
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script), json.dumps(env)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, cwd=Path(__file__).parents[3], start_new_session=True)
    child = None
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert psutil.Process(child).parent().pid == parent.pid
        # The parent alone, as `kill -9 <pid>` or the OOM killer would; its process group is left alone.
        parent.kill()
        parent.wait(timeout=PROCESS_TIMEOUT_S)
        assert _gone(child)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=PROCESS_TIMEOUT_S)
        if child is not None and psutil.pid_exists(child):
            os.kill(child, signal.SIGKILL)
        for stream in (parent.stdin, parent.stdout):
            if stream is not None:
                stream.close()


def test_the_contract_names_the_module_the_child_runs_as() -> None:
    # The loopback drill and the benchmarks find the child by the contract's name, without importing this module.
    assert contract.DASK_SCHEDULER_MODULE == dask_process.__name__ == dask_process.CHILD_MODULE
