"""What a report is made of: results, a convergence series and a loss distribution, as typed records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from runtime.local.prometheus.series import RunSeries
from runtime.protocol.messages import JobResult


class ConvergencePoint(BaseModel):
    """One option estimate at a given number of paths, with its confidence interval."""

    paths: int = Field(gt=0)
    estimate: float
    ci_low: float
    ci_high: float


class LossDistribution(BaseModel):
    """A histogram of portfolio losses (positive = money lost) with the risk figures marked on it."""

    model_config = ConfigDict(frozen=True)

    edges: list[float] = Field(min_length=2)
    counts: list[float]
    var: float
    cvar: float
    confidence: float = Field(gt=0, lt=1)

    @model_validator(mode="after")
    def _shapes(self) -> LossDistribution:
        if len(self.counts) != len(self.edges) - 1:
            raise ValueError(f"{len(self.counts)} counts need {len(self.counts) + 1} edges, got {len(self.edges)}")
        return self

    @classmethod
    def from_samples(cls, losses: np.ndarray, var: float, cvar: float, confidence: float,
                     bins: int = 120) -> LossDistribution:
        """Histogram ``losses`` into ``bins`` bins."""
        counts, edges = np.histogram(np.asarray(losses, dtype=float), bins=bins)
        return cls(edges=edges.tolist(), counts=counts.astype(float).tolist(), var=var, cvar=cvar,
                   confidence=confidence)


class ReportInput(BaseModel):
    """Everything one report shows."""

    title: str
    results: list[JobResult]
    convergence: list[ConvergencePoint] = []
    reference_price: float | None = Field(None, description="Closed-form price the convergence converges to.")
    reference_label: str = "Black-Scholes"
    loss: LossDistribution | None = None
    notes: list[str] = []
    validation: list[dict[str, str]] | None = None  # rows of `gpurt validate --local`, when it ran
    live: RunSeries | None = None  # the platform over the run, read from Prometheus (demo with monitoring)


class ReportFiles(BaseModel):
    """The files a report consists of."""

    directory: Path
    markdown: Path
    html: Path
    plots: dict[str, Path]
