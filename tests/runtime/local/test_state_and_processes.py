"""The state file (secret-safe, round trip) and the process helpers (groups stopped, nothing left over)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import psutil
import pytest

from runtime.access.local_state import LocalState, StateError, clear_state, load_state, save_state
from runtime.local import processes
from tests.file_modes import modes_open_to_others


def _state(tmp_path: Path, **changes: object) -> LocalState:
    base = {"project": "p", "api_url": "http://127.0.0.1:1", "emulator_host": "127.0.0.1:2",
            "control_token": "s3cret", "result_store": tmp_path.as_uri(), "workers": 2, "processes": []}
    return LocalState.model_validate({**base, **changes})


def test_state_round_trip_is_private(tmp_path: Path) -> None:
    state = _state(tmp_path)
    path = save_state(state, tmp_path / "local")

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_state(tmp_path / "local") == state
    assert "s3cret" not in repr(load_state(tmp_path / "local"))
    clear_state(tmp_path / "local")
    assert load_state(tmp_path / "local") is None


def test_corrupt_state_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(StateError, match="remove it"):
        load_state(tmp_path)


WRITES_A_FILE_AND_A_FOLDER = (
    "import os\n"
    "os.makedirs('store/results')\n"
    "open('store/results/job.json', 'w').write('{}')\n"
    "print('ready', flush=True)\n"
)


@pytest.mark.timeout(60)
def test_logs_and_what_a_started_process_writes_are_private(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir(mode=0o755)
    (logs / "p.log").write_text("an earlier run's log\n")
    (logs / "p.log").chmod(0o644)  # as the platform left it before
    record = processes.start_process("p", [sys.executable, "-c", WRITES_A_FILE_AND_A_FOLDER], os.environ,
                                     logs / "p.log", cwd=tmp_path)
    assert processes.wait_until(lambda: "ready" in processes.log_tail(logs / "p.log"), 30)
    processes.stop_process(record, grace_s=5)
    modes = {path.relative_to(tmp_path).as_posix(): stat.S_IMODE(path.stat().st_mode)
             for path in [logs, logs / "p.log", tmp_path / "store", tmp_path / "store/results",
                          tmp_path / "store/results/job.json"]}
    assert modes == {"logs": 0o700, "logs/p.log": 0o600, "store": 0o700, "store/results": 0o700,
                     "store/results/job.json": 0o600}


@pytest.mark.usefixtures("open_umask")
def test_private_dir_closes_a_folder_that_existed_open_and_every_parent_it_makes(tmp_path: Path) -> None:
    folder = tmp_path / "local"
    folder.mkdir(mode=0o755)
    assert stat.S_IMODE(processes.private_dir(folder).stat().st_mode) == 0o700
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)  # a folder of the user's own, above the one asked for: left as it was
    processes.private_dir(mine / "new" / "dir")
    assert stat.S_IMODE(mine.stat().st_mode) == 0o755
    assert modes_open_to_others(mine / "new") == {}


@pytest.mark.usefixtures("open_umask")
def test_write_private_is_private_from_the_start_and_closes_a_file_left_open(tmp_path: Path) -> None:
    left = tmp_path / "token"
    left.write_text("an earlier run's\n")
    left.chmod(0o644)
    assert processes.write_private(left, "new").read_text() == "new"
    assert stat.S_IMODE(left.stat().st_mode) == 0o600
    assert stat.S_IMODE(processes.private_file(tmp_path / "plot.png").stat().st_mode) == 0o600


SLEEPER_WITH_CHILD = (
    "import subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
    "print('ready', flush=True)\n"
    "time.sleep(120)\n"
)
IGNORES_SIGTERM = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(120)\n"
)


def _start(tmp_path: Path, code: str) -> processes.ProcessRecord:
    log = tmp_path / "p.log"
    record = processes.start_process("p", [sys.executable, "-c", code], os.environ, log)
    assert processes.wait_until(lambda: "ready" in processes.log_tail(log), 30)
    return record


@pytest.mark.timeout(60)
def test_stop_terminates_the_whole_group(tmp_path: Path) -> None:
    record = _start(tmp_path, SLEEPER_WITH_CHILD)
    children = psutil.Process(record.pid).children(recursive=True)
    assert children and processes.is_alive(record)

    killed = processes.stop_process(record, grace_s=10)

    assert not killed
    assert not processes.is_alive(record)
    assert not any(child.is_running() and child.status() != psutil.STATUS_ZOMBIE for child in children)


@pytest.mark.timeout(60)
def test_stop_kills_what_ignores_sigterm_after_the_grace(tmp_path: Path) -> None:
    record = _start(tmp_path, IGNORES_SIGTERM)

    assert processes.stop_process(record, grace_s=0.5)
    assert not processes.is_alive(record)


def test_a_recycled_pid_is_not_mistaken_for_ours(tmp_path: Path) -> None:
    me = psutil.Process()
    record = processes.ProcessRecord(name="x", pid=me.pid, create_time=me.create_time() - 100,
                                     log_path=tmp_path / "x.log", command=["x"])
    assert not processes.is_alive(record)
    assert processes.stop_process(record, grace_s=0.1) is False  # and it is left alone


def test_ports() -> None:
    ports = processes.free_ports("127.0.0.1", 8)

    assert len(set(ports)) == 8  # every port of a multi-replica platform is its own
    assert not any(processes.port_in_use("127.0.0.1", port) for port in ports)


def test_kill_is_a_crash_of_the_whole_group_with_no_grace(tmp_path: Path) -> None:
    record = _start(tmp_path, IGNORES_SIGTERM)

    processes.kill_process(record, timeout_s=10)

    assert not processes.is_alive(record)


def test_status_names_a_dead_scheduler_replica_and_how_to_bring_it_back(tmp_path: Path) -> None:
    from runtime.local.status import collect_status

    dead = _start(tmp_path, SLEEPER_WITH_CHILD)
    processes.kill_process(dead, timeout_s=10)
    replica = dead.model_copy(update={"name": "scheduler-2", "api_url": "http://127.0.0.1:1"})
    helper = dead.model_copy(update={"name": "emulator"})

    report = collect_status(_state(tmp_path, processes=[helper.model_dump(), replica.model_dump()]), tmp_path)

    assert not report.running
    hints = [p for p in report.problems if "is not running" in p]
    assert len(hints) == 2
    assert "scheduler-2" in hints[1] and "gpurt local restart-scheduler" in hints[1]
    assert "restart-scheduler" not in hints[0]  # the emulator is not restarted that way


def test_an_older_state_file_still_knows_its_scheduler_but_refuses_a_blind_restart(tmp_path: Path) -> None:
    from runtime.local.platform import LocalPlatform, LocalPlatformError

    emulator = _start(tmp_path, SLEEPER_WITH_CHILD)
    scheduler = _start(tmp_path, SLEEPER_WITH_CHILD)
    older = [record.model_dump(mode="json", exclude={"env", "cwd", "api_url"}) | {"name": name}
             for name, record in (("emulator", emulator), ("scheduler", scheduler))]
    directory = tmp_path / "local"
    directory.mkdir()
    base = _state(tmp_path).model_dump(mode="json", exclude={"processes", "lease_file"})
    (directory / "state.json").write_text(json.dumps({**base, "processes": older}))
    try:
        state = load_state(directory)
        assert [(r.name, r.api_url) for r in state.schedulers()] == [("scheduler", "http://127.0.0.1:1")]

        with pytest.raises(LocalPlatformError, match="older gpurt"):
            LocalPlatform(directory).restart_scheduler()
        assert processes.is_alive(scheduler)  # refused before anything was stopped
    finally:
        for record in (emulator, scheduler):
            processes.stop_process(record, grace_s=5)


def test_concurrent_state_writers_never_trip_over_each_other(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    directory = tmp_path / "local"
    states = [_state(tmp_path, project=f"p{i}") for i in range(2)]

    def write(state: LocalState) -> None:
        for _ in range(200):
            save_state(state, directory)

    with ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(write, state) for state in states]:
            future.result()  # a shared temporary file makes one writer's os.replace fail

    assert load_state(directory) in states
    assert [p.name for p in directory.iterdir()] == ["state.json"]


def test_clients_reach_a_live_replica_when_the_first_one_died(tmp_path: Path, monkeypatch) -> None:
    from runtime.access.target import API_URL_ENV, resolve_target

    monkeypatch.delenv(API_URL_ENV, raising=False)

    first = _start(tmp_path, SLEEPER_WITH_CHILD)
    second = _start(tmp_path, SLEEPER_WITH_CHILD)
    replicas = [first.model_copy(update={"name": "scheduler", "api_url": "http://127.0.0.1:1"}),
                second.model_copy(update={"name": "scheduler-2", "api_url": "http://127.0.0.1:2"})]
    save_state(_state(tmp_path, processes=[r.model_dump() for r in replicas]), tmp_path / "local")
    try:
        assert resolve_target(local_dir=tmp_path / "local").api_url == "http://127.0.0.1:1"
        processes.kill_process(first, timeout_s=10)
        assert resolve_target(local_dir=tmp_path / "local").api_url == "http://127.0.0.1:2"
    finally:
        processes.stop_process(second, grace_s=5)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.7", "::", "my-host"])
def test_the_platform_refuses_to_listen_beyond_loopback(tmp_path: Path, host: str) -> None:
    # Some of its ports take no credentials (the Dask scheduler, Prometheus, Google's emulator): loopback only.
    from runtime.local.platform import LocalConfig, LocalPlatform, LocalPlatformError

    with pytest.raises(LocalPlatformError, match="loopback only"):
        LocalPlatform(tmp_path / "local", LocalConfig(host=host, port=0, emulator_port=0)).up()
    assert not (tmp_path / "local" / "state.json").exists()  # refused before anything started
