"""Recovering the local platform from the dead state the runbooks are written for, with real processes.

``gpurt local restart-broker`` must start a broker that crashed (it used to refuse: "not running"), and
``restart_scheduler`` must bring a dead replica back before it stops a live one, so a consumer is left
throughout (it used to restart the live replica first, leaving none for 10-15 s).
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from runtime.access.local_state import LOCAL_DIR_ENV
from runtime.local import processes
from runtime.local.platform import EMULATOR, SCHEDULER, LocalPlatform, _replica_ready
from runtime.protocol.messages import JobStatus
from tests.runtime.local.two_replicas import ON_TWO_REPLICAS, STOP_GRACE_S
from validation.adapters.pubsub import GooglePubSubAdmin
from validation.drills.jobs import publish_noop
from validation.drills.results import ResultTap

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300), ON_TWO_REPLICAS]
KILL_TIMEOUT_S = 10.0
RESULT_WAIT_S = 90.0
SECOND = f"{SCHEDULER}-2"


def _round_trip(platform: LocalPlatform, job_id: str) -> None:
    """One no-op job published and answered ``succeeded``: the platform consumes and answers again."""
    state = platform.running_state()
    pubsub = GooglePubSubAdmin.for_emulator(state.emulator_host, state.project, state.broker_token)
    with ResultTap(pubsub, [job_id]) as tap:
        publish_noop(pubsub, job_id)
        assert tap.wait_all(RESULT_WAIT_S), f"{job_id} got no result"
    assert tap.results[job_id][0].status == JobStatus.SUCCEEDED


def test_restart_broker_starts_a_broker_that_crashed(platform: LocalPlatform) -> None:
    state = platform.running_state()
    crashed = state.process(EMULATOR)
    assert crashed is not None
    processes.kill_process(crashed, KILL_TIMEOUT_S)

    result = CliRunner().invoke(_app(), ["local", "restart-broker", "--json"],
                                env={"COLUMNS": "200", LOCAL_DIR_ENV: str(platform.directory)})

    assert result.exit_code == 0, result.output
    assert f'"old_pid": {crashed.pid}' in result.stdout
    _round_trip(platform, "recovery-after-broker-crash")


def test_restart_scheduler_brings_the_dead_replica_back_before_stopping_the_live_one(platform: LocalPlatform) -> None:
    platform.kill_scheduler(SECOND)
    steps: list[str] = []
    second_ready_when_first_stopped: list[bool] = []

    def on_step(step: str) -> None:
        steps.append(step)
        if step == f"stopping {SCHEDULER}":
            state = platform.state
            assert state is not None
            second = state.process(SECOND)
            second_ready_when_first_stopped.append(second is not None and processes.is_alive(second)
                                                   and _replica_ready(second, state.control_token))

    restarted = platform.restart_scheduler(on_step=on_step, drain_timeout_s=30.0, grace_s=STOP_GRACE_S)

    assert [r.name for r in restarted] == [SECOND, SCHEDULER], steps
    assert steps.index(f"starting {SECOND} again") < steps.index(f"draining {SCHEDULER} (pid {restarted[1].old_pid})")
    assert second_ready_when_first_stopped == [True], steps
    assert not restarted[0].drained and restarted[1].drained
    _round_trip(platform, "recovery-after-replica-crash")


def _app():  # type: ignore[no-untyped-def]
    from gpurt.cli.app import app

    return app
