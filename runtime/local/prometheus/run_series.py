"""Read the report's panels over one run from Prometheus: backlog, jobs finished per second by status,
jobs in flight, and the p95 of queue wait.

The panels must agree with the run's job table, so three things are done on purpose:

- the window is the run's, first publish to last result, on a grid of whole steps whose last point comes
  ``SETTLE_SCRAPES`` scrapes after the last result (a point shows the latest sample at or before it), and
  the panels are read only once every scrape target (the scheduler *and* the emulator, whose backlog
  gauge is one panel) has been scraped after that point: the right edge shows the state after the last
  result, a backlog of 0 and no job in flight;
- jobs finished per second are the differences of the jobs counter between grid points, divided by the
  step, computed here rather than by ``rate()``. ``rate()`` needs two samples of a series inside its
  window, so it reads 0 while a counter is first born (a status's first finished job creates its series
  at 1) and smears every finish over its whole window. A series first seen at grid point i started at 0
  in the step before it, so its value there counts as finished in that step. Summed over the grid, the
  panel's jobs are exactly the counter's increase over the run: the jobs the table shows finished;
- every panel says its scrape interval and step (``RunSeries.scrape_interval_s``, ``step_s``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from runtime.access.prometheus_api import PrometheusApi, Series
from runtime.local.processes import wait_until
from runtime.local.prometheus.config import SCRAPE_INTERVAL_S
from runtime.local.prometheus.series import Line, Panel, RunSeries
from runtime.protocol import contract

M = contract.METRICS
P = contract.PUBSUB_METRICS
# Quantiles look back over at least this many scrapes: smooth enough to read, short enough for a demo.
RATE_SCRAPES: Final = 10
# Points per panel at most; the step grows with the run so a long run stays readable.
MAX_POINTS: Final = 300
# How long to wait for every target to be scraped after the run's last grid point, in scrapes.
LAST_SCRAPE_WAIT_SCRAPES: Final = 5
# The grid runs on this many scrapes past the last result. A point shows the latest sample at or before
# it, and the scheduler counts a job finished (and out of flight) a moment after publishing its result:
# a point right at the last result could still show a sample from just before it.
SETTLE_SCRAPES: Final = 2


@dataclass(frozen=True)
class PanelSpec:
    """One panel: its title, unit, PromQL (``{window}`` is filled in), the label naming its lines, and
    whether its query is a counter the panel shows as a per-second increase per step."""

    title: str
    unit: str
    query: str
    label: str | None = None
    counter: bool = False


PANELS: Final = (
    PanelSpec("Request backlog", "messages",
              f'max({P.undelivered}{{{P.subscription_label}="{contract.REQUEST_SUBSCRIPTION}"}})'),
    PanelSpec("Jobs finished per second", "jobs/s", f"sum by (status) ({M.jobs_total})", "status", counter=True),
    PanelSpec("Jobs in flight", "jobs", f"sum({M.jobs_in_flight})"),
    PanelSpec("Queue wait, 95th percentile", "seconds",
              f"histogram_quantile(0.95, sum by (le) (rate({M.queue_wait_seconds}_bucket[{{window}}])))"),
)


@dataclass(frozen=True)
class Grid:
    """The times panels are evaluated at: ``start``, ``start + step``, ... ``end`` (unix seconds)."""

    start: float
    step_s: float
    points: int

    @property
    def end(self) -> float:
        """The last point: at or after the run's end."""
        return self.start + (self.points - 1) * self.step_s

    def times(self) -> list[float]:
        """Every point."""
        return [self.start + i * self.step_s for i in range(self.points)]


def run_grid(start: float, end: float, scrape_interval_s: float = SCRAPE_INTERVAL_S,
             max_points: int = MAX_POINTS) -> Grid:
    """Whole steps from ``start`` to the first point at or after ``end``: at least a scrape interval each,
    at most ``max_points`` points."""
    span = max(0.0, end - start)
    step = max(scrape_interval_s, span / max(1, max_points - 1))
    return Grid(start, step, 1 + max(1, math.ceil(span / step - 1e-9)))


def finished_per_second(points: Sequence[tuple[float, float]], grid: Grid) -> list[tuple[float, float]]:
    """A counter's samples at the grid's times as its increase per second in each step, at the step's end.

    The first point is 0 (what finished before the run is not the run's). A series absent at the previous
    point and present now was born in this step at 0, so its whole value counts; a value below the previous
    one is a counter reset (a restarted replica), which also started again at 0.
    """
    # By grid index: Prometheus answers with millisecond timestamps, the grid starts at any float.
    values = {round((t - grid.start) / grid.step_s): v for t, v in points}
    rates = [(grid.start, 0.0)]
    previous = values.get(0)
    for i, t in enumerate(grid.times()[1:], start=1):
        current = values.get(i)
        if current is None:
            increase = 0.0
        elif previous is None or current < previous:
            increase = current
        else:
            increase = current - previous
        rates.append((t, increase / grid.step_s))
        previous = current
    return rates


def panel_of(spec: PanelSpec, found: Sequence[Series], grid: Grid) -> Panel:
    """The panel of ``spec`` from its range query's series: x in seconds since the run started."""
    lines = []
    for series in found:
        points = [(t, v) for t, v in series.points if v == v]  # NaN: no data yet
        if spec.counter:
            points = finished_per_second(points, grid)
        if points:
            label = series.labels.get(spec.label, "") if spec.label else spec.title
            lines.append(Line(label=label, points=[(t - grid.start, v) for t, v in points]))
    return Panel(title=spec.title, unit=spec.unit, query=_query(spec, grid), lines=lines)


def collect_run_series(prometheus_url: str, start: float, end: float) -> RunSeries:
    """Every panel between unix times ``start`` and ``end`` (``PrometheusError`` if Prometheus cannot answer).

    Waits (a few scrapes at most) until Prometheus has scraped every target after the grid's last point,
    so the last jobs of the run and the backlog after them are in the panels.
    """
    grid = run_grid(start, end + SETTLE_SCRAPES * SCRAPE_INTERVAL_S)
    with PrometheusApi(prometheus_url) as api:
        # The grid's last point may lie up to a step after the run's end, that is in the future now.
        wait_s = max(0.0, grid.end - time.time()) + LAST_SCRAPE_WAIT_SCRAPES * SCRAPE_INTERVAL_S
        wait_until(lambda: last_scrape(api) >= grid.end, wait_s, interval_s=SCRAPE_INTERVAL_S / 4)
        panels = [panel_of(spec, api.query_range(_query(spec, grid), grid.start, grid.end, grid.step_s), grid)
                  for spec in PANELS]
    return RunSeries(source=prometheus_url, panels=panels, scrape_interval_s=SCRAPE_INTERVAL_S,
                     step_s=grid.step_s, duration_s=grid.end - grid.start)


def _query(spec: PanelSpec, grid: Grid) -> str:
    return spec.query.replace("{window}", f"{max(grid.step_s, RATE_SCRAPES * SCRAPE_INTERVAL_S):g}s")


def last_scrape(api: PrometheusApi) -> float:
    """Unix time of the latest scrape of every target (0 before the first)."""
    found = api.query("min(timestamp(up))")
    return found[0][1] if found else 0.0
