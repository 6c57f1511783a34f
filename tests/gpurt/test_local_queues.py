"""``gpurt local up --stack``: the queues a stack declares, and where a desk's broker token reaches the clients."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpurt.cli.app import app
from gpurt.cli.common import UserError
from gpurt.cli.local import Stack, stack_queues
from runtime.access.local_state import LocalState, load_state, save_state
from runtime.access.target import EMULATOR_ENV, resolve_target
from runtime.local.platform import LocalConfig, scheduler_env
from runtime.protocol import queues
from runtime.protocol.contract import SchedulerEnv
from runtime.protocol.queues import BUILT_IN_QUEUES, QueueSpec


def test_the_staging_stack_runs_its_desks_and_the_built_in_queues() -> None:
    assert stack_queues(Stack.STAGING) == (QueueSpec("default"), QueueSpec("rates-desk"),
                                           QueueSpec("credit-desk", max_slots=8), QueueSpec("urgent"))
    assert {queue.name for queue in stack_queues(Stack.PRODUCTION)} > {"default", "urgent", "rates-desk"}
    assert stack_queues(Stack.NONE) == BUILT_IN_QUEUES


def test_a_stack_file_that_declares_bad_queues_is_a_clear_error(tmp_path: Path) -> None:
    stack = Path("Pulumi.staging.yaml").read_text(encoding="utf-8").replace("maxSlots: 8", "maxSlots: 0")
    (tmp_path / "Pulumi.staging.yaml").write_text(stack, encoding="utf-8")
    with pytest.raises(UserError, match=r"(?s)--stack staging: .*queues\[1\]\.maxSlots: is 0"):
        stack_queues(Stack.STAGING, tmp_path)
    with pytest.raises(UserError, match="cannot read"):
        stack_queues(Stack.PRODUCTION, tmp_path)


def test_up_refuses_an_unknown_stack_before_starting_anything(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["local", "up", "--stack", "qa"], env={"GPURT_LOCAL_DIR": str(tmp_path)})
    assert result.exit_code == 2 and "qa" in result.output
    assert not any(tmp_path.iterdir())


def test_the_scheduler_gets_the_platforms_queues() -> None:
    declared = queues.with_built_ins([QueueSpec("rates-desk", weight=2, max_slots=3)])
    env = scheduler_env(LocalConfig(queues=declared), emulator_host="127.0.0.1:1", result_store="file:///r",
                        token_file=Path("t"), lease_file=None, emulator_admin_url=None)
    assert queues.decode(env[SchedulerEnv.QUEUES]) == declared


def test_a_desks_token_round_trips_privately_and_reaches_the_target(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    declared = queues.with_built_ins([QueueSpec("rates-desk")])
    state = LocalState(project="p", api_url="http://127.0.0.1:1", emulator_host="127.0.0.1:2", control_token="c",
                       result_store=tmp_path.as_uri(), processes=[], queues=declared,
                       broker_queue_tokens={"rates-desk": "desk-s3cret", "urgent": "oncall-s3cret"})
    save_state(state, tmp_path)
    loaded = load_state(tmp_path)
    assert loaded == state and "s3cret" not in repr(loaded)
    monkeypatch.delenv(EMULATOR_ENV, raising=False)
    target = resolve_target(local_dir=tmp_path)
    assert target.emulator_queue_tokens == {"rates-desk": "desk-s3cret", "urgent": "oncall-s3cret"}
    assert "s3cret" not in repr(target)
    # An emulator the environment names never gets the state's tokens.
    monkeypatch.setenv(EMULATOR_ENV, "127.0.0.1:3")
    assert resolve_target(local_dir=tmp_path).emulator_queue_tokens == {}


def test_status_shows_each_queue_as_the_scheduler_reports_it() -> None:
    from gpurt.cli.common import console
    from gpurt.cli.local import _print_queues

    with console.capture() as captured:
        _print_queues([
            {"name": "default", "weight": 1, "max_slots": None, "waiting": 3, "slots": 2, "started": 40,
             "wait_p95_s": 0.25, "share": 0.5},
            {"name": "credit-desk", "weight": 1, "max_slots": 8, "waiting": 0, "slots": 0, "started": 0,
             "wait_p95_s": None, "share": 0.0},
            {"name": "urgent", "weight": 1, "max_slots": None, "waiting": 0, "slots": 0, "started": 1,
             "wait_p95_s": 0.1, "share": 0.012},
        ])
    lines = captured.get().splitlines()
    assert any("default" in line and "0.25" in line and "50 %" in line for line in lines)
    assert any("credit-desk" in line and " 8 " in line for line in lines)
    assert any("urgent" in line and "first" in line for line in lines)
