"""Drill "alerts fire and on-call is notified": the drill checklist's "validate alerts fire for pending jobs
and lease saturation; confirm on-call receives a notification", on the local platform.

It provokes each condition it can produce here (``alert_conditions.PHASES``) and measures, per
alert, the time until it fires in Prometheus, until the notification reaches the alert receiver, and
until it resolves once the condition is removed. GPU (DCGM) rules cannot fire without a GPU: the drill
says so per rule. It fails if any alert that can fire here does not fire, notify and resolve.

Monitoring must run with a short alert time scale; when the platform runs none, or a slower one, the
drill starts it at ``DRILL_TIME_SCALE`` for its duration and puts the previous set-up back afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

from pydantic import BaseModel

from runtime.access.alert_notifications import read_log
from runtime.access.local_monitoring import MonitoringInfo
from runtime.access.prometheus_api import PrometheusApi
from runtime.manifests import alerts
from runtime.manifests.alert_timescale import format_duration, longest_lookback_s, scale_rule_groups
from validation.drills.alert_conditions import PHASES, Condition
from validation.drills.base import POLL_S, DrillContext, DrillFailed, wait_for

# 10-minute for: windows become 12 s; the rules' shapes are unchanged (see runtime/manifests/alert_timescale.py).
DRILL_TIME_SCALE: Final = 0.02
GPU_RULES: Final = frozenset(rule.alert for rule in alerts.GPU_RULES)
GPU_REASON: Final = ("needs a GPU: its series come from the DCGM exporter on GPU nodes (DCGM_FI_*, "
                     "up{job=\"dcgm-exporter\"}), which this machine has none of")
# Rules no condition of this drill produces yet, and why: their runbooks say how to check them by hand.
NOT_DRILLED: Final = {
    "VertexOverflowHigh": "not produced by this drill: it needs a platform with Vertex AI overflow "
                          "(`gpurt local up --overflow-after SECONDS`) kept full for the rule's window",
    "QueueWaitSLOBreached": "not produced by this drill: its threshold is a wait of 5 minutes per job (p95 of a "
                            "queue), which the alert time scale does not shorten; promtool's unit test fires it",
}
SEVERITY: Final = {rule.alert: rule.priority.severity for rule in alerts.ALL_RULES}


class AlertTiming(BaseModel):
    """One rule's outcome in the drill; times in seconds."""

    alert: str
    severity: str
    condition: str | None = None
    fired_s: float | None = None  # provoked → firing in Prometheus
    notified_s: float | None = None  # provoked → firing notification recorded by the receiver
    resolved_s: float | None = None  # condition removed → no longer active in Prometheus
    # condition removed → resolved notification recorded; negative when a windowed rule resolved by itself first
    resolve_notified_s: float | None = None
    reason: str | None = None  # why it cannot fire here
    passed: bool = False


def run(ctx: DrillContext) -> None:
    """Provoke every condition, time each alert, and fail if one that can fire here did not."""
    before = ctx.state.monitoring
    info = _drill_monitoring(ctx, before)
    timings = {rule.alert: AlertTiming(alert=rule.alert, severity=SEVERITY[rule.alert],
                                       reason=GPU_REASON if rule.alert in GPU_RULES else None)
               for rule in alerts.ALL_RULES}
    try:
        _run_conditions(ctx, info, timings)
    finally:
        # Whatever was measured is reported, also when a condition could not be provoked.
        ctx.details.extend(timings.values())
        _restore_monitoring(ctx, before, info)
    missed = [t.alert for t in timings.values() if t.reason is None and not t.passed]
    if missed:
        raise DrillFailed(f"alerts that can fire here did not fire, notify and resolve: {', '.join(missed)}")


def _drill_monitoring(ctx: DrillContext, current: MonitoringInfo | None) -> MonitoringInfo:
    if current is not None and current.alert_time_scale <= DRILL_TIME_SCALE:
        ctx.note(f"using the platform's monitoring (alert time scale {current.alert_time_scale:g})")
        return current
    state = ctx.platform.start_monitoring(DRILL_TIME_SCALE, ctx.on_step)
    if state.monitoring is None:
        raise DrillFailed("monitoring did not start")
    ctx.note(f"started monitoring for the drill at alert time scale {DRILL_TIME_SCALE:g} "
             f"(a 10 min for: waits {600 * DRILL_TIME_SCALE:g} s)")
    return state.monitoring


def _restore_monitoring(ctx: DrillContext, before: MonitoringInfo | None, used: MonitoringInfo) -> None:
    if before is used:
        return
    if before is None:
        ctx.platform.stop_monitoring()
        ctx.note("stopped the drill's monitoring (the platform ran without it)")
    else:
        ctx.platform.start_monitoring(before.alert_time_scale, ctx.on_step)
        ctx.note(f"monitoring back at alert time scale {before.alert_time_scale:g}")


def _run_conditions(ctx: DrillContext, info: MonitoringInfo, timings: dict[str, AlertTiming]) -> None:
    with PrometheusApi(info.prometheus_url) as api:
        _check_ready(ctx, api, info)
        for phase in PHASES:
            runnable = []
            for condition in phase:
                reason = condition.unavailable(ctx)
                for alert in condition.alerts:
                    timings[alert].condition, timings[alert].reason = condition.name, reason
                if reason is None:
                    runnable.append(condition)
                else:
                    ctx.note(f"{condition.name}: not produced here ({reason})")
            if runnable:
                _drill_phase(ctx, api, info, runnable, timings)
    for alert, timing in timings.items():
        if timing.reason is None and timing.condition is None:
            timing.reason = NOT_DRILLED.get(alert, "no condition of this drill produces it")


def _check_ready(ctx: DrillContext, api: PrometheusApi, info: MonitoringInfo) -> None:
    def targets_up() -> bool:
        targets = api.targets()
        return bool(targets) and all(t.health == "up" for t in targets)

    wait_for(targets_up, ctx.timeout_s, "every scrape target to be up in Prometheus")
    broken = {r.name: r.last_error for g in api.rule_groups() for r in g.rules if r.health == "err"}
    if broken:
        raise DrillFailed(f"rules fail to evaluate: {broken}")
    lookback = _history_needed_s(info)
    took = wait_for(lambda: bool(api.query(f"count(up offset {format_duration(lookback)})")), ctx.timeout_s,
                    f"Prometheus to hold the {lookback:g} s of history the rules look back")
    if took > POLL_S:
        ctx.note(f"waited {took:.0f}s for {lookback:g}s of metric history")


def _history_needed_s(info: MonitoringInfo) -> float:
    """Seconds of history the rules that can fire here look back: a rule comparing now with earlier
    (JobQueueGrowing's offset) sees nothing until that much history exists.

    The rules are the cloud's at the alert time scale and scrape interval the monitoring recorded, which is
    what the local monitoring stack wrote into the rules file its Prometheus evaluates.
    """
    scaled = scale_rule_groups(alerts.build_rule_groups(), info.alert_time_scale, info.scrape_interval_s,
                               info.evaluation_interval_s)
    return longest_lookback_s([{**g, "rules": [r for r in g["rules"] if r["alert"] not in GPU_RULES]}
                               for g in scaled])


def _drill_phase(ctx: DrillContext, api: PrometheusApi, info: MonitoringInfo, conditions: list[Condition],
                 timings: dict[str, AlertTiming]) -> None:
    """Provoke ``conditions`` together, time their alerts firing and notified, remove them, time the resolution."""
    expected = {alert for condition in conditions for alert in condition.alerts}
    # Start from quiet: an alert still resolving from the previous phase would read as fired at once.
    wait_for(lambda: not (expected & {a.name for a in api.alerts()}), ctx.timeout_s,
             f"{', '.join(sorted(expected))} to be inactive before provoking them")
    names = " + ".join(condition.name for condition in conditions)
    waits = {rule.name: rule.duration for group in api.rule_groups() for rule in group.rules}
    ctx.on_step(f"provoking: {names}")
    started, t0 = datetime.now(UTC), time.monotonic()
    restores = []
    try:
        for condition in conditions:
            restores.append(condition.provoke(ctx))

        def fired_and_notified() -> bool:
            firing, log = _firing(api), read_log(info.notifications_file)
            for alert in expected:
                timing = timings[alert]
                if timing.fired_s is None and alert in firing:
                    # Prometheus knows when the condition began (activeAt); it fires its for: later. Timed from
                    # there, not from this poll, which may come late (provoking takes a few seconds).
                    began = firing[alert]
                    timing.fired_s = (time.monotonic() - t0 if began is None else
                                      max(0.0, (began - started).total_seconds() + waits.get(alert, 0.0)))
                note = log.first(alert, "firing", started)
                if timing.notified_s is None and note is not None:
                    timing.notified_s = (note.received_at - started).total_seconds()
            return all(timings[a].fired_s is not None and timings[a].notified_s is not None for a in expected)

        _poll_until(fired_and_notified, ctx.timeout_s)
    finally:
        removed, t1 = datetime.now(UTC), time.monotonic()
        for restore in reversed(restores):
            restore()
    fired = sorted(a for a in expected if timings[a].fired_s is not None)
    ctx.note(f"{names}: fired " + (", ".join(f"{a} in {timings[a].fired_s:.1f}s" for a in fired) or "nothing"))

    def resolved() -> bool:
        active, log = {a.name for a in api.alerts()}, read_log(info.notifications_file)
        for alert in fired:
            timing = timings[alert]
            if timing.resolved_s is None and alert not in active:
                timing.resolved_s = time.monotonic() - t1
            # Searched from the start: a windowed rule (increase over 15 min) may resolve on its own while
            # the condition still holds; its time is then negative.
            note = log.first(alert, "resolved", started)
            if timing.resolve_notified_s is None and note is not None:
                timing.resolve_notified_s = (note.received_at - removed).total_seconds()
        return all(timings[a].resolved_s is not None and timings[a].resolve_notified_s is not None for a in fired)

    _poll_until(resolved, ctx.timeout_s)
    for alert in expected:
        timing = timings[alert]
        timing.passed = None not in (timing.fired_s, timing.notified_s, timing.resolved_s)


def _firing(api: PrometheusApi) -> dict[str, datetime | None]:
    """Firing alerts and when their condition began."""
    return {a.name: a.active_at for a in api.alerts() if a.state == "firing"}


def _poll_until(predicate: Callable[[], bool], timeout_s: float) -> bool:
    """Poll ``predicate`` until true or ``timeout_s``; the caller reads what was measured either way."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True
