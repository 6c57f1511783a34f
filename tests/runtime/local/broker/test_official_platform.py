"""``gpurt local up --broker official``: the whole platform on Google's emulator, validated end to end once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runtime.local.broker.brokers import Broker
from runtime.local.broker.official import find_official_emulator

STOP_GRACE_S = 3.0  # the platform is thrown away: no need to wait for a graceful Dask shutdown


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_the_platform_runs_and_validates_on_the_official_broker(tmp_path: Path) -> None:
    from gpurt.cli.app import app
    from runtime.local import processes
    from runtime.local.platform import LocalConfig, LocalPlatform

    if find_official_emulator() is None:  # raises, failing the test, where gcloud lacks the emulator
        pytest.skip("gcloud is not installed, so the official Pub/Sub emulator is not available")
    local = LocalPlatform(tmp_path / "local", LocalConfig(port=0, emulator_port=0, workers=1, broker=Broker.OFFICIAL))
    local.up()
    emulator = local.running_state().process("emulator")
    try:
        state = local.running_state()
        assert any(part.endswith(".jar") for part in emulator.command)
        assert state.emulator_admin_url is None  # the official emulator has no admin view

        result = CliRunner().invoke(app, ["validate", "--local", "--local-dir", str(local.directory), "--json"])
        assert result.exit_code == 0, result.output
        statuses = {r["name"]: r["status"] for r in json.loads(result.stdout[result.stdout.index("{"):])["results"]}
        assert statuses["probe.round-trip"] == statuses["pubsub.dlq-empty"] == "pass"
        assert statuses["pubsub.subscription-settings"] == "pass"

        status = local.status()
        assert (status.healthy, status.ready, status.problems, status.subscriptions) == (True, True, [], {})
    finally:
        local.down(drain_timeout_s=0, grace_s=STOP_GRACE_S)
    assert not processes.is_alive(emulator)  # down stops the JVM too


def test_time_scaling_is_refused_on_the_official_broker(tmp_path: Path) -> None:
    from runtime.local.platform import LocalConfig, LocalPlatform, LocalPlatformError

    local = LocalPlatform(tmp_path, LocalConfig(port=0, emulator_port=0, broker=Broker.OFFICIAL,
                                                emulator_time_scale=0.01))
    with pytest.raises(LocalPlatformError, match="needs the builtin broker"):
        local.up()
    assert local.state is None  # nothing was started
