"""The platform over a run, as Prometheus recorded it: a few panels of time series.

The demo reads them from Prometheus' HTTP API (``runtime.monitoring.run_series``); the report only holds
and draws them (``live_plot``), so writing a report never needs a running Prometheus.
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
    """Every panel of one run, and where it was read."""

    source: str  # the Prometheus URL
    panels: list[Panel]
