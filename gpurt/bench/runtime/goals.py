"""The runtime's per-job overhead goals, judged on figures taken in one ``gpurt bench runtime`` run.

Ratios within one run, not absolute rates, are what the goals compare: the machine may be shared, and
both sides of a ratio see the same load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Final

from gpurt.bench.runtime.end_to_end import RuntimeFigures
from gpurt.bench.runtime.measure import fmt_duration

# End-to-end throughput should keep at least this share of Dask alone (the batch at once).
MIN_SHARE_OF_DASK: Final = 0.40
# What the scheduler and Pub/Sub may add per job, over Dask alone (seconds).
MAX_OVERHEAD_PER_JOB_S: Final = 0.003


@dataclass(frozen=True)
class Goal:
    """One goal: what it asks, what was measured, and whether that meets it."""

    name: str
    target: str
    measured: str
    met: bool

    def as_json(self) -> dict[str, str | bool]:
        """The goal as plain values."""
        return {"name": self.name, "target": self.target, "measured": self.measured, "met": self.met}


def judge(runs: Sequence[RuntimeFigures]) -> list[Goal]:
    """The goals for each worker count, and whether end-to-end throughput grows with workers."""
    goals: list[Goal] = []
    for run in runs:
        workers = f"{run.workers} worker" if run.workers == 1 else f"{run.workers} workers"
        goals.append(Goal(f"end-to-end / Dask alone, {workers}", f">= {MIN_SHARE_OF_DASK:.0%}",
                          f"{run.share_of_direct:.0%}", run.share_of_direct >= MIN_SHARE_OF_DASK))
        goals.append(Goal(f"scheduler + Pub/Sub overhead per job, {workers}",
                          f"<= {fmt_duration(MAX_OVERHEAD_PER_JOB_S)}", fmt_duration(run.overhead_per_job_s),
                          run.overhead_per_job_s <= MAX_OVERHEAD_PER_JOB_S))
    ordered = sorted(runs, key=lambda r: r.workers)
    if len({r.workers for r in ordered}) > 1:
        rates = [r.e2e_jobs_per_s for r in ordered]
        goals.append(Goal(
            "end-to-end throughput grows with workers", "each worker count faster than the one before",
            " → ".join(f"{r.workers}: {r.e2e_jobs_per_s:.0f}/s" for r in ordered),
            all(later > earlier for earlier, later in pairwise(rates))))
    return goals
