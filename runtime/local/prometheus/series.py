"""The platform over a run, as Prometheus recorded it: a few panels of time series.

``run_series`` reads them from Prometheus' HTTP API; the demo's report (``gpurt.demo.report.live_plot``) only
holds and draws them, so writing a report never needs a running Prometheus.
"""

from __future__ import annotations

from pydantic import BaseModel


class Line(BaseModel):
    """One series: a legend label and (seconds since the run started, value) points."""

    label: str
    points: list[tuple[float, float]]


class Panel(BaseModel):
    """One chart: a title, the unit of its y axis, the PromQL it came from, and its lines."""

    title: str
    unit: str
    query: str
    lines: list[Line]


class RunSeries(BaseModel):
    """Every panel of one run, where it was read, and how finely."""

    source: str  # the Prometheus URL
    panels: list[Panel]
    scrape_interval_s: float | None = None  # how often Prometheus sampled the platform
    step_s: float | None = None  # seconds between the points of a line
    duration_s: float | None = None  # the run's window, first publish to last result (whole steps)

    def resolution(self) -> str:
        """What the figure says about its sampling, e.g. "scraped every 1 s, a point every 2 s"."""
        parts = []
        if self.scrape_interval_s is not None:
            parts.append(f"scraped every {self.scrape_interval_s:g} s")
        if self.step_s is not None:
            parts.append(f"a point every {self.step_s:.3g} s")
        return ", ".join(parts)
