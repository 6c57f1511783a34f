"""The operator drills that take another path on one scheduler replica, through ``gpurt drill all``.

tests/runtime/local/test_replicas.py runs ``drill all`` on two replicas: the drain-upgrade, evict-pool
and DLQ drills run there (with one replica they take the same path, the others merely not drained), and
the alert drill too, where the leader alerts fire. Here, on one replica, run the two drills whose path
differs: the leader drill (no lease between processes: two in-process candidates at the lease-store
seam) and the chaos drill with the faults whose path differs on one replica (killing or draining the only
replica stops all intake); test_drill_chaos.py runs every fault on two replicas, where the others (a killed
worker, the connection flood, the store's failures) take the same path.
Emulator time scale 0.01 as on the replicas, so both platforms see the same redelivery timing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from gpurt.cli.drills import DRILL_HELP
from runtime.protocol import contract
from validation.drills.runner import DRILLS

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]
EMULATOR_TIME_SCALE = 0.01
DRILL_TIMEOUT_S = "90"
CHAOS_JOBS = "10"  # the chaos drill's own test (test_drill_chaos.py) runs a bigger mixed load on two replicas
# run by test_replicas.py on two replicas, where the alert drill's leader alerts fire too
SKIPPED = ("drain-upgrade", "evict-pool", "dlq", "alerts")
STOP_GRACE_S = 3.0  # the platform is thrown away: no need to wait for a graceful Dask shutdown


@pytest.fixture(scope="module")
def platform(tmp_path_factory) -> Iterator[object]:
    from runtime.local.platform import LocalConfig, LocalPlatform

    local = LocalPlatform(tmp_path_factory.mktemp("drills"), LocalConfig(
        port=0, emulator_port=0, workers=2, emulator_time_scale=EMULATOR_TIME_SCALE))
    local.up()
    yield local
    local.down(drain_timeout_s=0, grace_s=STOP_GRACE_S)


def _gpurt(*args: str) -> object:
    from gpurt.cli.app import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_every_drill_has_a_command() -> None:
    assert list(DRILL_HELP) == list(DRILLS)


def test_drill_all_refuses_to_skip_a_drill_that_does_not_exist() -> None:
    result = _gpurt("drill", "all", "--skip", "chaos", "--skip", "alert")

    assert result.exit_code == 2
    assert "no drill called alert" in result.output and "alerts" in result.output


def test_the_one_replica_drills_pass_and_leave_the_platform_valid(platform, monkeypatch) -> None:
    from validation.drills import chaos, faults

    monkeypatch.setattr(chaos, "FAULTS", (faults.kill_replica, faults.drain_intake))
    skips = [arg for name in SKIPPED for arg in ("--skip", name)]
    result = _gpurt("drill", "all", "--local-dir", str(platform.directory), "--timeout", DRILL_TIMEOUT_S, "--json",
                    "--jobs", CHAOS_JOBS, *skips)

    assert result.exit_code == 0, result.output
    drills = {d["name"]: d for d in json.loads(result.stdout[result.stdout.index("["):])}
    assert list(drills) == [name for name in DRILLS if name not in SKIPPED]  # every other drill, in order
    assert all(d["passed"] for d in drills.values())
    evidence = {name: " | ".join(d["evidence"]) for name, d in drills.items()}
    assert "replica-b took over" in evidence["leader"] and "handed over in" in evidence["leader"]
    assert "one scheduler replica: killing it stops all intake" in evidence["chaos"]
    assert drills["chaos"]["figures"]["lost"] == 0 and "broker restart" in evidence["chaos"]
    assert "broker restart: first new job done after (s)" in drills["chaos"]["figures"]

    validation = _gpurt("validate", "--local", "--local-dir", str(platform.directory))
    assert validation.exit_code == 0, validation.output  # drills clean up: DLQ empty, scheduler healthy


def test_dlq_drill_refuses_to_replay_someone_elses_dead_letters(platform) -> None:
    from validation.adapters.pubsub import GooglePubSubAdmin

    state = platform.running_state()
    pubsub = GooglePubSubAdmin.for_emulator(state.emulator_host, state.project, state.broker_token)
    pubsub.publish(contract.REQUEST_DLQ_TOPIC, b'{"job_id": "user-job-7", "type": "noop"}', {"job_id": "user-job-7"})

    result = _gpurt("drill", "dlq", "--local-dir", str(platform.directory), "--timeout", DRILL_TIMEOUT_S)

    assert result.exit_code == 1
    assert "FAIL dlq" in result.output and "already holds 1+ message(s) (e.g. job user-job-7)" in result.output
    messages = pubsub.pull(contract.REQUEST_DLQ_SUBSCRIPTION, 10, timeout_s=2)
    assert [m.attributes["job_id"] for m in messages] == ["user-job-7"]  # untouched


def test_the_local_forgery_is_refused_by_the_broker(platform) -> None:
    # The chaos drill's first forgery row on its own: a user's token and no token try every call a forger needs.
    from validation.drills import forgery
    from validation.drills.base import DrillContext

    ctx = DrillContext(platform, timeout_s=float(DRILL_TIMEOUT_S), run_id="local-forgery")

    assert forgery.local_forgery(ctx) == []
    assert ctx.figures["local forgery: calls refused"] == "5 of 5"
