"""``LocalPlatform`` up / status / down with the real emulator, scheduler and Dask LocalCluster."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import psutil
import pytest

from runtime.local import LocalConfig, LocalPlatform, LocalPlatformError
from runtime.local.processes import port_in_use
from runtime.protocol.contract import SUBSCRIPTIONS
from runtime.protocol.queues import QueueSpec, request_subscription, with_built_ins
from tests.file_modes import modes_open_to_others

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]


def _tree(pids: list[int]) -> list[psutil.Process]:
    procs = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            procs += [proc, *proc.children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
    return procs


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _carrying(procs: list[psutil.Process], secret: str) -> list[str]:
    """The processes whose environment holds ``secret`` anywhere (a variable's value or part of one)."""
    found = []
    for proc in procs:
        try:
            if any(secret in value for value in proc.environ().values()):
                found.append(" ".join(proc.cmdline()[:4]))
        except psutil.NoSuchProcess:
            pass
    return found


@pytest.mark.usefixtures("open_umask")
def test_up_status_down_leaves_nothing_behind(tmp_path: Path) -> None:
    queues = with_built_ins([QueueSpec("desk-x", weight=2, max_slots=1)])  # as `--stack` reads a stack's
    platform = LocalPlatform(tmp_path / "local", LocalConfig(workers=1, port=0, emulator_port=0, queues=queues))
    steps: list[str] = []

    started = platform.up(on_step=steps.append)

    state = started.state
    assert not started.already_running and steps
    assert stat.S_IMODE((tmp_path / "local" / "state.json").stat().st_mode) == 0o600
    assert {s.name for s in SUBSCRIPTIONS} <= set(started.created_topology)
    again = platform.up()
    assert again.already_running and again.state == state  # idempotent: same processes, same token

    status = platform.status()
    assert status.running and status.healthy and status.ready
    assert [(p.id, p.workers) for p in status.pools] == [("local", 1)]
    assert {s.name for s in SUBSCRIPTIONS} <= status.subscriptions.keys()
    # The stack's queues: their topology, a token per queue but default, and the scheduler consuming each.
    assert {request_subscription("desk-x"), request_subscription("urgent")} <= status.subscriptions.keys()
    assert set(state.broker_queue_tokens) == {"desk-x", "urgent"} and state.queues == queues
    assert platform.target().emulator_queue_tokens == state.broker_queue_tokens
    assert status.scheduler is not None
    assert [(q["name"], q["weight"], q["max_slots"]) for q in status.scheduler["queues"]] == [
        ("default", 1, None), ("desk-x", 2, 1), ("urgent", 1, None)]

    tree = _tree([p.pid for p in state.processes])
    assert len(tree) >= 3  # emulator, scheduler, and the scheduler's Dask worker(s)
    # The token is in no process's environment, the scheduler's Dask scheduler and workers above all (the
    # scheduler reads it from its 0600 file), and nothing the platform wrote is open to others.
    assert _carrying(tree, state.control_token) == []
    assert modes_open_to_others(tmp_path / "local") == {}
    host, port = state.api_url.removeprefix("http://").split(":")
    emulator_port = int(state.emulator_host.split(":")[1])

    stopped = platform.down()

    assert stopped.was_running and stopped.drained and stopped.killed == []
    assert not any(_alive(proc) for proc in tree)
    # Stopped from the top, the scheduler closes its own Dask workers: none was signalled from outside while the
    # scheduler still ran, which its nanny would have answered by starting a new worker process.
    scheduler_log = next(p.log_path for p in state.processes if p.name == "scheduler")
    assert "Restarting worker" not in Path(scheduler_log).read_text(errors="replace")
    assert not port_in_use(host, int(port)) and not port_in_use(host, emulator_port)
    assert platform.state is None
    assert not platform.status().running
    assert platform.down().was_running is False


def test_a_taken_port_is_a_clear_error_and_starts_nothing(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        platform = LocalPlatform(tmp_path, LocalConfig(port=taken, emulator_port=0))
        with pytest.raises(LocalPlatformError, match=f"port {taken}"):
            platform.up()
    assert platform.state is None


def test_a_scheduler_that_dies_at_start_up_is_reported_with_its_log(tmp_path: Path) -> None:
    # An invalid setting makes the real scheduler exit at once; up() must say so and clean up.
    platform = LocalPlatform(tmp_path, LocalConfig(port=0, emulator_port=0,
                                                   scheduler_env={"GPURT_POOLS": "no-such-backend"}))
    with pytest.raises(LocalPlatformError, match="scheduler process exited") as info:
        platform.up()
    assert "scheduler.log" in str(info.value)
    assert platform.state is None
