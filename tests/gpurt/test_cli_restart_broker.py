"""``gpurt local restart-broker`` on a running local platform: only the broker restarts, and no request is lost.

Requests are published just before the restart, so some run while intake drains and the rest wait in the
subscription across the restart (the builtin broker keeps them on disk). Every one must end ``succeeded``
in the result store, and a request published after the restart too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from gpurt.cli.app import app
from runtime.access.control_api import ApiError
from runtime.local import LocalPlatform
from runtime.local.platform import EMULATOR
from runtime.protocol import contract
from tests.gpurt import ON_THE_CLI_PLATFORM
from tests.runtime.local.prometheus.polling import poll

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240), ON_THE_CLI_PLATFORM]

JOBS = 6
JOB_SLEEP_S = 0.4  # one local worker: a few seconds of work, so the restart finds some running, some waiting
PUBLISH_TIMEOUT_S = 30.0
RESULT_WAIT_S = 90.0


def _publish(platform: LocalPlatform, job_ids: list[str]) -> None:
    clients = platform.pubsub()
    try:
        topic = clients.topic(contract.REQUEST_TOPIC)
        futures = [
            clients.publisher.publish(
                topic,
                json.dumps({"job_id": job_id, "type": "noop", "params": {"sleep_s": JOB_SLEEP_S}}).encode(),
                job_id=job_id,
                type="noop",
            )
            for job_id in job_ids
        ]
        for future in futures:
            future.result(timeout=PUBLISH_TIMEOUT_S)
    finally:
        clients.close()


def _states(platform: LocalPlatform, job_ids: list[str]) -> dict[str, str | None]:
    with platform.api() as api:
        states: dict[str, str | None] = {}
        for job_id in job_ids:
            try:
                states[job_id] = api.get_job(job_id).state
            except ApiError:  # 404: no result yet
                states[job_id] = None
        return states


def _pids(platform: LocalPlatform) -> dict[str, int]:
    state = platform.state
    assert state is not None
    return {record.name: record.pid for record in state.processes}


def test_restart_broker_restarts_only_the_broker_and_loses_no_request(
    platform: LocalPlatform, cli_env: dict[str, str]
) -> None:
    before = _pids(platform)
    waiting = [f"restart-broker-{index}" for index in range(JOBS)]
    _publish(platform, waiting)

    result = CliRunner().invoke(app, ["local", "restart-broker", "--json"], env=cli_env)

    assert result.exit_code == 0, result.output
    restarted: dict[str, Any] = json.loads(result.stdout)
    after = _pids(platform)
    assert restarted == {"old_pid": before[EMULATOR], "new_pid": after[EMULATOR], "durable": True}
    assert after[EMULATOR] != before[EMULATOR]
    assert {n: p for n, p in after.items() if n != EMULATOR} == {n: p for n, p in before.items() if n != EMULATOR}
    late = ["restart-broker-after"]
    _publish(platform, late)
    jobs = [*waiting, *late]
    poll(
        lambda: None not in (states := _states(platform, jobs)).values() and "running" not in states.values(),
        RESULT_WAIT_S,
        "a result for every request",
    )
    assert _states(platform, jobs) == dict.fromkeys(jobs, "succeeded")
    with platform.api() as api:
        assert api.status()["consuming"]  # intake resumed
