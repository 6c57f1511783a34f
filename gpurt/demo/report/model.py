"""What a report is made of: the run's results, which of them the figures draw, and the platform's series."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from runtime.local.prometheus.series import RunSeries
from runtime.protocol.messages import JobResult


class ReportInput(BaseModel):
    """Everything one report shows."""

    title: str
    results: list[JobResult]
    convergence_ids: list[str] = []  # results pricing one option at growing path counts: the convergence figure
    var_id: str | None = None  # the VaR job whose loss distribution is drawn
    notes: list[str] = []
    validation: list[dict[str, str]] | None = None  # rows of `gpurt validate --local`, when it ran
    live: RunSeries | None = None  # the platform over the run, read from Prometheus (demo with monitoring)


class ReportFiles(BaseModel):
    """The files a report consists of."""

    directory: Path
    markdown: Path
    html: Path
    plots: dict[str, Path]
