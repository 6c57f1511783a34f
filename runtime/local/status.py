"""A snapshot of the local platform: its processes, the scheduler's health, pools and backlog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel

from runtime.access.control_api import ApiClient, ApiError, Pool
from runtime.access.local_monitoring import MonitoringInfo
from runtime.access.local_state import LocalState
from runtime.local import processes

STATS_TIMEOUT_S = 2.0  # the emulator's admin view is local and instant; longer means it is stuck


class ProcessStatus(BaseModel):
    """One background process."""

    name: str
    pid: int
    alive: bool
    log_path: Path


class MonitoringStatus(BaseModel):
    """Prometheus and Alertmanager of the platform, as Prometheus sees its targets and alerts."""

    prometheus_url: str  # the Prometheus UI: /alerts, /targets, /graph
    alertmanager_url: str
    alert_time_scale: float
    targets_up: int = 0
    targets: int = 0
    firing: list[str] = []  # alert names firing now
    pending: list[str] = []


class PlatformStatus(BaseModel):
    """Everything ``gpurt local status`` shows; ``running`` is False when nothing was started."""

    running: bool
    directory: Path
    api_url: str | None = None
    emulator_host: str | None = None
    processes: list[ProcessStatus] = []
    healthy: bool = False
    ready: bool = False
    scheduler: dict[str, Any] = {}
    pools: list[Pool] = []
    subscriptions: dict[str, dict[str, Any]] = {}  # emulator admin view: backlog, outstanding, dead-lettered
    monitoring: MonitoringStatus | None = None  # None: started without --monitoring
    problems: list[str] = []


def collect_status(state: LocalState | None, directory: Path) -> PlatformStatus:
    """Ask every part of the platform how it is; never raises for an unreachable part, records it."""
    if state is None:
        return PlatformStatus(running=False, directory=directory)
    procs = [ProcessStatus(name=p.name, pid=p.pid, alive=processes.is_alive(p), log_path=p.log_path)
             for p in state.processes]
    status = PlatformStatus(running=all(p.alive for p in procs), directory=directory, api_url=state.api_url,
                            emulator_host=state.emulator_host, processes=procs)
    replicas = {p.name for p in state.schedulers()}
    for proc in procs:
        if not proc.alive:
            hint = "; `gpurt local restart-scheduler` starts it again" if proc.name in replicas else ""
            status.problems.append(f"{proc.name} (pid {proc.pid}) is not running; see {proc.log_path}{hint}")
    with ApiClient(state.api_url, state.control_token, timeout_s=3.0) as api:
        try:
            api.healthz()
            status.healthy = True
            status.ready = api.is_ready()
            status.scheduler = api.status()
            status.pools = api.pools()
        except ApiError as exc:
            status.problems.append(str(exc))
    if state.emulator_admin_url:
        try:
            status.subscriptions = _emulator_stats(state.emulator_admin_url)
        except (httpx.HTTPError, ValueError) as exc:
            status.problems.append(f"emulator admin view unreachable: {exc}")
    if state.monitoring is not None:
        status.monitoring = _monitoring_status(state.monitoring, status.problems)
    return status


def _monitoring_status(info: MonitoringInfo, problems: list[str]) -> MonitoringStatus:
    from runtime.access.prometheus_api import PrometheusApi, PrometheusError

    found = MonitoringStatus(prometheus_url=info.prometheus_url, alertmanager_url=info.alertmanager_url,
                             alert_time_scale=info.alert_time_scale)
    with PrometheusApi(info.prometheus_url, httpx.Client(timeout=STATS_TIMEOUT_S)) as api:
        try:
            targets = api.targets()
            alerts = api.alerts()
        except PrometheusError as exc:
            problems.append(str(exc))
            return found
    found.targets, found.targets_up = len(targets), sum(t.health == "up" for t in targets)
    found.firing = sorted({a.name for a in alerts if a.state == "firing"})
    found.pending = sorted({a.name for a in alerts if a.state == "pending"})
    problems.extend(f"scrape target {t.url} ({t.job}) is down: {t.last_error}" for t in targets
                    if t.health == "down")
    return found


def subscription_stats(admin_url: str, subscription: str) -> dict[str, Any]:
    """The emulator's counters (undelivered, outstanding, dead_lettered) for one subscription."""
    stats = _emulator_stats(admin_url)
    if subscription not in stats:
        raise KeyError(f"the emulator has no subscription {subscription}")
    return stats[subscription]


def _emulator_stats(admin_url: str) -> dict[str, dict[str, Any]]:
    response = httpx.get(f"{admin_url}/stats", timeout=STATS_TIMEOUT_S)
    response.raise_for_status()
    body = response.json()
    subs = body.get("subscriptions", body) if isinstance(body, dict) else {}
    if isinstance(subs, list):
        return {str(item.get("name", i)).rsplit("/", 1)[-1]: item for i, item in enumerate(subs)}
    return {str(name).rsplit("/", 1)[-1]: value for name, value in subs.items() if isinstance(value, dict)}
