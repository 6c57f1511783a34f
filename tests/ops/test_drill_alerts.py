"""``gpurt drill alerts`` on a real local platform with real Prometheus and Alertmanager.

One scheduler replica (no election, so the leader condition says why it cannot be produced), the
emulator's backoffs and the alert windows scaled down so the drill takes about a minute.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from manifests import alerts
from ops.drills.alert_conditions import NO_LEADER

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(400)]
EMULATOR_TIME_SCALE = 0.01
ALERT_TIME_SCALE = 0.01  # 10-minute for: windows become 6 s
STOP_GRACE_S = 3.0


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from local_platform.platform import LocalConfig, LocalPlatform

    local = LocalPlatform(tmp_path_factory.mktemp("alert-drill"), LocalConfig(
        port=0, emulator_port=0, workers=1, emulator_time_scale=EMULATOR_TIME_SCALE, monitoring=True,
        alert_time_scale=ALERT_TIME_SCALE))
    local.up()
    yield local
    local.down(drain_timeout_s=0, grace_s=STOP_GRACE_S)


def test_every_non_gpu_alert_fires_notifies_and_resolves(platform) -> None:
    from gpurt.app import app

    result = CliRunner().invoke(app, ["drill", "alerts", "--local-dir", str(platform.directory), "--timeout", "60",
                                      "--json"], env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    (drill,) = json.loads(result.stdout[result.stdout.index("["):])
    rules = {t["alert"]: t for t in drill["details"]}
    assert sorted(rules) == sorted(rule.alert for rule in alerts.ALL_RULES)  # every rule is listed
    gpu = {rule.alert for rule in alerts.GPU_RULES}
    leader = set(NO_LEADER.alerts)
    for name, timing in rules.items():
        if name in gpu:
            assert "needs a GPU" in timing["reason"] and timing["fired_s"] is None
        elif name in leader:
            assert "--replicas 2" in timing["reason"]  # one replica: said, not skipped silently
        else:
            assert timing["passed"] and timing["reason"] is None, timing
            assert 0 < timing["fired_s"] <= timing["notified_s"] + 1  # notified after firing (clock granularity)
            assert timing["resolved_s"] is not None
    assert "using the platform's monitoring (alert time scale 0.01)" in drill["evidence"]


def test_the_drill_left_the_platform_healthy(platform) -> None:
    from local_platform.status import collect_status

    report = collect_status(platform.state, platform.directory)
    assert report.running and report.healthy and report.ready
    assert report.monitoring is not None and report.monitoring.targets_up == report.monitoring.targets == 3
    assert report.pools and all(p.workers == 1 for p in report.pools)  # the evicted pool came back
