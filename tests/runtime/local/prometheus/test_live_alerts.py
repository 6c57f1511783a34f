"""Real Prometheus and Alertmanager on loopback evaluating the project's rules against real metric endpoints.

The scrape targets are the scheduler's own ``SchedulerMetrics`` registry served by prometheus-client (so
the series carry the scheduler's real names and types) and the project's emulator. The alert time scale
0.01 turns JobQueueBacklog's ``for: 10m`` into 6 s.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runtime.access.alert_notifications import read_log
from runtime.access.local_monitoring import MonitoringInfo
from runtime.access.local_state import ProcessRecord
from runtime.access.prometheus_api import PrometheusApi
from runtime.local import processes
from runtime.local.prometheus import config, stack
from runtime.manifests import alerts
from runtime.scheduler.metrics import SchedulerMetrics
from tests.runtime.local.prometheus.polling import poll

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
TIME_SCALE = 0.01
START_TIMEOUT_S = 30.0
ALERT_TIMEOUT_S = 40.0  # 6 s for:, plus scrape, evaluation, Alertmanager's group wait and a loaded machine
HOST = "127.0.0.1"
PROJECT = "gpurt-live-alerts"


@dataclass
class Live:
    info: MonitoringInfo
    records: list[ProcessRecord]
    metrics: SchedulerMetrics
    emulator_admin: str


def _create_topology(address: str) -> None:
    from runtime.access.transport import make_clients
    from runtime.pubsub.admin import ensure_topology

    clients = make_clients(PROJECT, address)
    try:
        ensure_topology(PROJECT, clients.publisher, clients.subscriber)
    finally:
        clients.close()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    from prometheus_client import start_http_server

    from runtime.local.broker import start_emulator

    binaries = stack.find_binaries()  # fails (does not skip) with the install command when missing
    metrics = SchedulerMetrics()
    metrics.leader.set(1)
    metrics.pool_workers.labels("local").set(1)
    metrics.backlog.set(0)
    metrics_port, *ports = processes.free_ports(HOST, 4)
    server, thread = start_http_server(metrics_port, HOST, registry=metrics.registry)
    emulator = start_emulator(port=0, admin_port=0)
    _create_topology(emulator.address)
    emulator_admin = f"{HOST}:{emulator.admin_port}"
    targets = config.ScrapeTargets(schedulers=(f"{HOST}:{metrics_port}",), dask=(), emulator=(emulator_admin,))
    directory = tmp_path_factory.mktemp("monitoring")
    info, records = stack.start_monitoring(directory, targets, TIME_SCALE, HOST, tuple(ports), {}, binaries)
    try:
        poll(lambda: stack.ready(info), START_TIMEOUT_S, "Prometheus, Alertmanager and the receiver to be ready")
        yield Live(info, records, metrics, emulator_admin)
    finally:
        for record in reversed(records):
            processes.stop_process(record, grace_s=5)
        server.shutdown()
        thread.join(5)
        emulator.stop()
    assert not any(processes.is_alive(r) for r in records)


def test_every_rule_of_the_cloud_loads_without_error(live: Live) -> None:
    with PrometheusApi(live.info.prometheus_url) as api:
        groups = api.rule_groups()
    loaded = {rule.name: rule for group in groups for rule in group.rules}
    assert sorted(g.name for g in groups) == sorted(name for name, _ in alerts.RULE_GROUPS)
    assert sorted(loaded) == sorted(rule.alert for rule in alerts.ALL_RULES)
    assert {name: r.last_error for name, r in loaded.items() if r.health == "err"} == {}
    # The time scale reached Prometheus: JobQueueBacklog waits 10 min in the cloud, 6 s here.
    assert loaded["JobQueueBacklog"].duration == pytest.approx(600 * TIME_SCALE)


def test_scrape_targets_are_up(live: Live) -> None:
    def all_up() -> list[object] | None:
        with PrometheusApi(live.info.prometheus_url) as api:
            targets = api.targets()
        return targets if targets and all(t.health == "up" for t in targets) else None

    targets = poll(all_up, 20, "every target to be scraped successfully")
    assert {t.job for t in targets} == {"gpu-scheduler", config.EMULATOR_JOB}


def test_backlog_above_threshold_fires_notifies_and_resolves(live: Live) -> None:
    started = datetime.now(UTC)
    live.metrics.backlog.set(150)

    def firing() -> bool:
        with PrometheusApi(live.info.prometheus_url) as api:
            return any(a.name == "JobQueueBacklog" and a.state == "firing" for a in api.alerts())

    poll(firing, ALERT_TIMEOUT_S, "JobQueueBacklog to fire in Prometheus")
    fired = poll(lambda: read_log(live.info.notifications_file).first("JobQueueBacklog", "firing", started),
                  ALERT_TIMEOUT_S, "the firing notification to reach the receiver")
    assert fired.payload.receiver == alerts.Priority.P2.severity  # routed by severity
    alert = next(a for a in fired.payload.alerts if a.name == "JobQueueBacklog")
    assert alert.annotations["summary"] == "150 job requests waiting"
    assert alert.annotations["runbook_url"].endswith("/queue-backlog.md")

    live.metrics.backlog.set(3)
    resolved = poll(lambda: read_log(live.info.notifications_file).first("JobQueueBacklog", "resolved", started),
                     ALERT_TIMEOUT_S, "the resolved notification")
    assert resolved.received_at > fired.received_at


def test_the_report_panels_come_from_prometheus(live: Live, tmp_path: Path) -> None:
    from gpurt.demo.report import ReportInput, write_report
    from runtime.access.prometheus_api import PrometheusApi
    from runtime.local.prometheus.run_series import collect_run_series, last_scrape

    live.metrics.export_queues(["default"])  # as the scheduler does at its start: the wait histogram from zero
    start = time.time()
    # A scrape that began before ``start`` could still read what follows; the run starts after one began later.
    with PrometheusApi(live.info.prometheus_url) as api:
        poll(lambda: last_scrape(api) > start, 30, "a scrape after the start")
    live.metrics.in_flight.set(2)
    live.metrics.jobs.labels("noop", "succeeded").inc(5)
    for _ in range(20):
        live.metrics.queue_wait.labels("default").observe(0.3)  # all in the (0.25, 0.5] bucket

    def panels() -> dict[str, object] | None:
        found = {p.title: p for p in collect_run_series(live.info.prometheus_url, start, time.time()).panels}
        return found if all(p.lines for p in found.values()) else None

    found = poll(panels, 30, "every panel to have samples")
    assert found["Jobs in flight"].lines[0].points[-1][1] == 2
    assert found["Request backlog"].lines[0].points[-1][1] == 0  # the emulator's series, nothing published
    (finished,) = found["Jobs finished per second"].lines
    assert finished.label == "succeeded"
    series = collect_run_series(live.info.prometheus_url, start, time.time())
    assert series.step_s is not None and series.scrape_interval_s is not None
    (finished,) = next(p for p in series.panels if p.title == "Jobs finished per second").lines
    assert sum(rate for _, rate in finished.points) * series.step_s == pytest.approx(5)  # the 5 jobs, no more
    # histogram_quantile interpolates linearly inside the bucket: 0.25 + 0.95 * (0.5 - 0.25).
    assert found["Queue wait, 95th percentile"].lines[0].points[-1][1] == pytest.approx(0.4875)

    files = write_report(ReportInput(title="t", results=[], live=series), tmp_path)
    (caption,) = [c for c in files.plots if "Prometheus" in c]
    assert files.plots[caption].stat().st_size > 10_000 and caption in files.markdown.read_text()
