"""The alert drill's choices that need no running platform: which monitoring it drills against, what it
leaves behind, and why the leader condition cannot be produced on one replica.

The drill itself runs for real on two replicas in tests/runtime/local/test_replicas.py (``drill all``),
against that platform's own monitoring; these cover the other paths at the platform seam.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from runtime.access.local_monitoring import MonitoringInfo
from runtime.local.prometheus import config
from runtime.manifests.alert_timescale import longest_lookback_s
from validation.drills import alerts as alert_drill
from validation.drills.alert_conditions import NO_LEADER
from validation.drills.base import DrillContext


def _info(scale: float) -> MonitoringInfo:
    return MonitoringInfo(prometheus_url="http://127.0.0.1:1", alertmanager_url="http://127.0.0.1:2",
                          receiver_url="http://127.0.0.1:3", directory=Path("/m"), notifications_file=Path("/m/n"),
                          alert_time_scale=scale, scrape_interval_s=1.0, evaluation_interval_s=1.0)


@dataclass
class RecordingPlatform:
    """The two calls the drill makes on a platform, recorded; ``start_monitoring`` answers at that scale."""

    lease_file: Path | None = None
    calls: list[tuple[str, float | None]] = field(default_factory=list)

    def start_monitoring(self, scale: float, on_step: Any = None) -> SimpleNamespace:
        self.calls.append(("start", scale))
        return SimpleNamespace(monitoring=_info(scale))

    def stop_monitoring(self) -> None:
        self.calls.append(("stop", None))

    def running_state(self) -> SimpleNamespace:
        return SimpleNamespace(lease_file=self.lease_file)


def _ctx(platform: RecordingPlatform) -> DrillContext:
    return DrillContext(platform=platform, timeout_s=1.0)  # type: ignore[arg-type]


def test_a_platform_without_monitoring_gets_the_drills_own_and_it_is_stopped_after() -> None:
    platform = RecordingPlatform()
    ctx = _ctx(platform)

    used = alert_drill._drill_monitoring(ctx, None)
    alert_drill._restore_monitoring(ctx, None, used)

    assert used.alert_time_scale == alert_drill.DRILL_TIME_SCALE
    assert platform.calls == [("start", alert_drill.DRILL_TIME_SCALE), ("stop", None)]


def test_monitoring_at_real_time_is_restarted_scaled_and_put_back_after() -> None:
    platform, real_time = RecordingPlatform(), _info(1.0)
    ctx = _ctx(platform)

    used = alert_drill._drill_monitoring(ctx, real_time)
    alert_drill._restore_monitoring(ctx, real_time, used)

    assert platform.calls == [("start", alert_drill.DRILL_TIME_SCALE), ("start", 1.0)]
    assert any("back at alert time scale 1" in line for line in ctx.evidence)


def test_monitoring_already_scaled_down_is_used_as_it_is() -> None:
    platform, scaled = RecordingPlatform(), _info(alert_drill.DRILL_TIME_SCALE / 2)
    ctx = _ctx(platform)

    used = alert_drill._drill_monitoring(ctx, scaled)
    alert_drill._restore_monitoring(ctx, scaled, used)

    assert used is scaled and platform.calls == []
    assert f"using the platform's monitoring (alert time scale {scaled.alert_time_scale:g})" in ctx.evidence


def test_one_replica_says_how_to_drill_the_leader_alerts() -> None:
    reason = NO_LEADER.unavailable(_ctx(RecordingPlatform(lease_file=None)))
    assert reason is not None and "`gpurt local up --replicas 2`" in reason
    assert NO_LEADER.unavailable(_ctx(RecordingPlatform(lease_file=Path("/leases/leader.json")))) is None


def test_the_history_the_drill_waits_for_is_what_the_rules_the_stack_writes_look_back() -> None:
    # The drill rescales the cloud's rules from what the platform's monitoring recorded; the local stack writes
    # its rules file with build_rules. Both must agree, GPU rules (which cannot fire here) left out.
    info = _info(alert_drill.DRILL_TIME_SCALE).model_copy(update={
        "scrape_interval_s": config.SCRAPE_INTERVAL_S, "evaluation_interval_s": config.EVALUATION_INTERVAL_S})
    written = [{**g, "rules": [r for r in g["rules"] if r["alert"] not in alert_drill.GPU_RULES]}
               for g in config.build_rules(alert_drill.DRILL_TIME_SCALE)["groups"]]

    assert alert_drill._history_needed_s(info) == longest_lookback_s(written) > 0
