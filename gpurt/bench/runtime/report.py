"""The runtime benchmark's figures as rows (for the terminal table and BENCHMARKS.md) and as JSON.

A run's JSON (``gpurt bench runtime --json``) can be read back as the baseline of a later run, so a
change to the scheduler is shown before and after, each measured in its own run on the same machine.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from gpurt.bench.runtime.end_to_end import RuntimeFigures
from gpurt.bench.runtime.goals import Goal
from gpurt.bench.runtime.measure import fmt_duration as fmt

Rows = list[tuple[str, list[str]]]


class BaselineStage(BaseModel):
    """One profile stage of an earlier run."""

    stage: str
    share: float
    per_job_s: float


class BaselineCpu(BaseModel):
    """One part's CPU per job in an earlier run."""

    part: str
    per_job_s: float


class BaselineRun(BaseModel):
    """One worker count of an earlier run, as its JSON has it."""

    workers: int
    e2e_jobs_per_s: float
    dask_alone_jobs_per_s: float
    dask_one_per_worker_jobs_per_s: float
    e2e_share_of_dask_alone: float
    overhead_per_job_s: float
    overhead_vs_one_per_worker_s: float
    load_average: float
    profile: list[BaselineStage] = []
    cpu_per_job: list[BaselineCpu] = []  # runs before the CPU meter have none
    dask_one_per_worker_cpu_per_job_s: float | None = None


class Baseline(BaseModel):
    """An earlier run of ``gpurt bench runtime --json``."""

    date: str
    jobs: int
    runs: list[BaselineRun]


@dataclass(frozen=True)
class LabelledBaseline:
    """A baseline and what it measured (shown in the tables' titles)."""

    label: str
    baseline: Baseline


def run_json(jobs: int, date: str, runs: Sequence[RuntimeFigures], goals: Sequence[Goal]) -> dict[str, Any]:
    """The JSON of a run: figures per worker count and the goals."""
    return {"date": date, "jobs": jobs, "runs": [run.as_json() for run in runs], "goals": [g.as_json() for g in goals]}


def read_baseline(path: Path) -> Baseline:
    """The run saved in ``path`` by ``--json``; ValueError with the reason if it is not one."""
    try:
        return Baseline.model_validate(json.loads(path.read_text()))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValidationError) as exc:
        raise ValueError(f"{path} is not the JSON of `gpurt bench runtime --json`: {exc}") from None


def figure_rows(runs: Sequence[RuntimeFigures]) -> Rows:
    """The figures of each worker count, one row per figure."""
    return [
        ("jobs completed", [f"{r.completed}/{r.jobs}" for r in runs]),
        ("end-to-end throughput", [f"{r.e2e_jobs_per_s:.1f} jobs/s" for r in runs]),
        ("Dask alone, the batch at once", [f"{r.direct_jobs_per_s:.1f} jobs/s" for r in runs]),
        ("Dask alone, one job per worker at a time", [f"{r.per_worker_jobs_per_s:.1f} jobs/s" for r in runs]),
        ("end-to-end / Dask alone", [f"{r.share_of_direct:.0%}" for r in runs]),
        ("end-to-end / Dask one job per worker", [_share(r.e2e_jobs_per_s, r.per_worker_jobs_per_s) for r in runs]),
        ("ceiling under flow control: Dask one job per worker / Dask alone",
         [_share(r.per_worker_jobs_per_s, r.direct_jobs_per_s) for r in runs]),
        ("scheduler + Pub/Sub overhead per job", [fmt(r.overhead_per_job_s) for r in runs]),
        ("… over Dask one job per worker", [fmt(r.overhead_vs_per_worker_s) for r in runs]),
        ("queue wait p50 / p95", [f"{fmt(r.queue_wait_p50_s)} / {fmt(r.queue_wait_p95_s)}" for r in runs]),
        ("publish→result latency p50 / p95", [f"{fmt(r.latency_p50_s)} / {fmt(r.latency_p95_s)}" for r in runs]),
        ("load average after the run", [f"{r.load_average:.1f}" for r in runs]),
        *cpu_total_rows(runs),
    ]


def baseline_rows(baseline: Baseline) -> Rows:
    """The comparable figures of an earlier run, one row per figure."""
    runs = baseline.runs
    return [
        ("end-to-end throughput", [f"{r.e2e_jobs_per_s:.1f} jobs/s" for r in runs]),
        ("Dask alone, the batch at once", [f"{r.dask_alone_jobs_per_s:.1f} jobs/s" for r in runs]),
        ("Dask alone, one job per worker at a time", [f"{r.dask_one_per_worker_jobs_per_s:.1f} jobs/s" for r in runs]),
        ("end-to-end / Dask alone", [f"{r.e2e_share_of_dask_alone:.0%}" for r in runs]),
        ("end-to-end / Dask one job per worker",
         [_share(r.e2e_jobs_per_s, r.dask_one_per_worker_jobs_per_s) for r in runs]),
        ("ceiling under flow control: Dask one job per worker / Dask alone",
         [_share(r.dask_one_per_worker_jobs_per_s, r.dask_alone_jobs_per_s) for r in runs]),
        ("scheduler + Pub/Sub overhead per job", [fmt(r.overhead_per_job_s) for r in runs]),
        ("… over Dask one job per worker", [fmt(r.overhead_vs_one_per_worker_s) for r in runs]),
        ("load average after the run", [f"{r.load_average:.1f}" for r in runs]),
        *cpu_total_rows(runs),
    ]


def cpu_total_rows(runs: Sequence[RuntimeFigures | BaselineRun]) -> Rows:
    """CPU per job of the whole platform end to end, and of Dask alone one job per worker (none if unmeasured)."""
    parts = [cpu_of(r) for r in runs]
    if not any(parts):
        return []
    alone = [r.per_worker_cpu_per_job_s if isinstance(r, RuntimeFigures) else r.dask_one_per_worker_cpu_per_job_s
             for r in runs]
    return [("CPU per job, every process end to end", [fmt(sum(s for _, s in p)) if p else "-" for p in parts]),
            ("… Dask alone, one job per worker", [fmt(a) for a in alone])]


def cpu_rows(runs: Sequence[RuntimeFigures | BaselineRun]) -> Rows:
    """CPU per job of each part of the platform end to end, per worker count, in the order measured."""
    lookup = [dict(cpu_of(r)) for r in runs]
    order = list(dict.fromkeys(part for r in runs for part, _ in cpu_of(r)))
    return [(part, [fmt(p[part]) if part in p else "-" for p in lookup]) for part in order]


def cpu_of(run: RuntimeFigures | BaselineRun) -> list[tuple[str, float]]:
    """A run's CPU per job by part, as (part, seconds per job)."""
    shares = run.cpu if isinstance(run, RuntimeFigures) else run.cpu_per_job
    return [(c.part, c.per_job_s) for c in shares]


def stage_rows(profiles: Sequence[Sequence[tuple[str, float, float]]]) -> Rows:
    """Where a job slot's time went, per worker count: ms per job and share, largest stages first.

    ``profiles`` holds, per worker count, (stage, share, seconds per job) triples.
    """
    order: dict[str, float] = {}
    for profile in profiles:
        for stage, share, _ in profile:
            order[stage] = max(order.get(stage, 0.0), share)
    lookup = [{stage: (share, per_job) for stage, share, per_job in profile} for profile in profiles]
    return [(stage, [f"{fmt(p[stage][1])} ({p[stage][0]:.0%})" if stage in p else "-" for p in lookup])
            for stage in sorted(order, key=order.__getitem__, reverse=True)]


def profile_of(run: RuntimeFigures | BaselineRun) -> list[tuple[str, float, float]]:
    """A run's profile stages as (stage, share, seconds per job)."""
    stages = run.stages if isinstance(run, RuntimeFigures) else run.profile
    return [(s.stage, s.share, s.per_job_s) for s in stages]


def worker_columns(counts: Sequence[int]) -> list[str]:
    """Column titles for worker counts."""
    return [f"{n} worker" if n == 1 else f"{n} workers" for n in counts]


def markdown_table(first: str, columns: Sequence[str], rows: Rows) -> list[str]:
    """A Markdown table: a label column, then one right-aligned column per entry of ``columns``."""
    return [f"| {' | '.join([first, *columns])} |", "| --- |" + " ---: |" * len(columns),
            *(f"| {name} | {' | '.join(values)} |" for name, values in rows)]


def goal_markdown(goals: Sequence[Goal]) -> list[str]:
    """The goals as a Markdown table."""
    return ["| goal | target | measured | met |", "| --- | --- | --- | --- |",
            *(f"| {g.name} | {g.target} | {g.measured} | {'yes' if g.met else '**no**'} |" for g in goals)]


def _share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else "n/a"
