"""Read the report's panels over one run from Prometheus: backlog, jobs finished per second by status,
jobs in flight, and the p95 of queue wait."""

from __future__ import annotations

from typing import Final

from components import contract
from runtime.local.processes import wait_until
from runtime.monitoring.config import SCRAPE_INTERVAL_S
from runtime.monitoring.prometheus_api import PrometheusApi
from runtime.report.live import Line, Panel, RunSeries

M = contract.METRICS
P = contract.PUBSUB_METRICS
# Rates and quantiles look back over this many scrapes: smooth enough to read, short enough for a demo.
RATE_SCRAPES: Final = 10
# Points per panel at most; the step grows with the run so a long run stays readable.
MAX_POINTS: Final = 300
LAST_SCRAPE_WAIT_S: Final = 5 * SCRAPE_INTERVAL_S

_RATE_WINDOW: Final = f"{RATE_SCRAPES * SCRAPE_INTERVAL_S:g}s"
PANELS: Final = (
    ("Request backlog", "messages",
     f'max({P.undelivered}{{{P.subscription_label}="{contract.REQUEST_SUBSCRIPTION}"}})', None),
    ("Jobs finished per second", "jobs/s", f"sum by (status) (rate({M.jobs_total}[{_RATE_WINDOW}]))", "status"),
    ("Jobs in flight", "jobs", f"sum({M.jobs_in_flight})", None),
    ("Queue wait, 95th percentile", "seconds",
     f"histogram_quantile(0.95, sum by (le) (rate({M.queue_wait_seconds}_bucket[{_RATE_WINDOW}])))", None),
)


def collect_run_series(prometheus_url: str, start: float, end: float) -> RunSeries:
    """Every panel between unix times ``start`` and ``end`` (``PrometheusError`` if Prometheus cannot answer).

    Waits (a few scrapes at most) until Prometheus has scraped the scheduler after ``end``, so the last
    jobs of the run are in the panels.
    """
    step = max(SCRAPE_INTERVAL_S, (end - start) / MAX_POINTS)
    panels = []
    with PrometheusApi(prometheus_url) as api:
        wait_until(lambda: _last_scrape(api) >= end, LAST_SCRAPE_WAIT_S, interval_s=SCRAPE_INTERVAL_S / 4)
        for title, unit, query, label in PANELS:
            lines = [Line(label=series.labels.get(label, "") if label else title,
                          points=[(t - start, v) for t, v in series.points if v == v])  # NaN: no data yet
                     for series in api.query_range(query, start, end, step)]
            panels.append(Panel(title=title, unit=unit, query=query, lines=[ln for ln in lines if ln.points]))
    return RunSeries(source=prometheus_url, panels=panels)


def _last_scrape(api: PrometheusApi) -> float:
    """Unix time of the latest scrape of every scheduler replica (0 before the first)."""
    found = api.query(f'min(timestamp(up{{job="{contract.SCHEDULER_DEPLOYMENT}"}}))')
    return found[0][1] if found else 0.0
