"""``gpurt bench utilization``: slot utilization under bursts of sleeping jobs, queue wait under a steady stream."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Final

import typer
from rich.progress import Progress, TaskID
from rich.table import Table

from gpurt.cli.bench.runtime import (
    bench_date,
    bench_platform,
    device_line,
    figures_table,
    goal_table,
    progress_bar,
    show_figures,
)
from gpurt.cli.common import console, err_console, friendly_errors

if TYPE_CHECKING:
    from gpurt.bench.runtime.goals import Goal
    from gpurt.bench.runtime.utilization import UtilizationFigures

SECTION: Final = "utilization"
THREAD_KINDS_SHOWN: Final = 8  # rows of the by-thread table; the other kinds of thread are summed


@friendly_errors
def bench_utilization(
    jobs: Annotated[int, typer.Option(min=1, max=100_000, help="Jobs in each burst (published at once).")] = 200,
    workers: Annotated[list[int] | None, typer.Option(
        min=1, max=64, help="Dask workers of the platform; repeat for several (default: 1 and 4).")] = None,
    sleep_ms: Annotated[list[float] | None, typer.Option(
        "--sleep-ms", min=0.1, max=60_000, help="Job duration in ms; repeat for several (default: 10, 50, 200).")
    ] = None,
    stream_jobs: Annotated[int, typer.Option(
        min=0, max=100_000, help="Jobs of the steady stream at 80 % of capacity (0: no stream).")] = 200,
    floor_tasks: Annotated[int, typer.Option(
        min=0, max=100_000, help="Tasks a bare Dask client runs, apart, for the floor under the scheduler's CPU "
        "per job (0: not measured).")] = 300,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures and goals as JSON.")] = False,
    write: Annotated[bool, typer.Option("--write", help="Write the figures to BENCHMARKS.md.")] = False,
) -> None:
    """Slot utilization = jobs x job duration / (workers x makespan), on a fresh local platform per worker count.

    Each platform first runs a small european_option job (cold: from asking for the platform to its result,
    and its run time against the same job warm), then a burst per job duration, then a steady stream of
    50 ms jobs at 80 % of its capacity; the scheduler process's own CPU per job is read over each burst.
    Last, with no platform running, a bare Dask client's CPU per task is measured as the floor under it.
    """
    from gpurt.bench.runtime.dask_floor import measure_dask_floor
    from gpurt.bench.runtime.utilization import GRID_SLEEPS_S, GRID_WORKERS, judge, measure, merge

    out = err_console if as_json else console  # with --json, stdout carries the JSON alone
    sleeps = tuple(ms / 1000 for ms in sleep_ms) if sleep_ms else GRID_SLEEPS_S
    runs = []
    for count in sorted(set(workers or GRID_WORKERS)):
        asked_at = time.perf_counter()  # the fresh platform's first job is timed from here
        with bench_platform(count, out) as platform, progress_bar(out) as progress:
            runs.append(measure(platform, count, jobs, sleeps, stream_jobs, on_progress=_Bars(progress),
                                asked_at=asked_at))
    figures = merge(runs)
    if floor_tasks:
        with out.status(f"a bare Dask client running {floor_tasks} tasks"):
            figures = replace(figures, dask_floor=measure_dask_floor(floor_tasks))
    goals = judge(figures)
    date = bench_date()
    show_figures({"date": date, **figures.as_json(), "goals": [g.as_json() for g in goals]}, _tables(figures, goals),
                 as_json=as_json, section=SECTION, markdown=markdown(figures, goals, date) if write else None, out=out)
    if not as_json:
        console.print(f"load average {figures.load_average:.1f}")


class _Bars:
    """One progress bar per phase of the measurement, added when the phase reports first."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._tasks: dict[str, TaskID] = {}

    def __call__(self, what: str, done: int, total: int) -> None:
        if what not in self._tasks:
            self._tasks[what] = self._progress.add_task(what, total=total)
        self._progress.update(self._tasks[what], completed=done)


def _rows(figures: UtilizationFigures) -> tuple[list[str], list[list[str]]]:
    from gpurt.bench.runtime.measure import fmt_duration as fmt

    header = ["workers", "job", "jobs", "makespan", "utilization", "jobs/s", "scheduler CPU/job",
              "Dask scheduler CPU/job"]
    rows = [[str(b.workers), fmt(b.sleep_s), str(b.completed) + ("" if b.completed == b.jobs else f" of {b.jobs}"),
             fmt(b.makespan_s), f"{b.utilization:.0%}", f"{b.as_json()['jobs_per_s']:.1f}",
             fmt(b.scheduler_cpu_per_job_s), fmt(b.dask_scheduler_cpu_per_job_s)] for b in figures.bursts]
    return header, rows


def _thread_rows(figures: UtilizationFigures) -> tuple[list[str], list[list[str]]]:
    """The scheduler's CPU per job by kind of thread, a column per burst; the busiest kinds, the rest summed."""
    from gpurt.bench.runtime.measure import fmt_duration as fmt

    bursts = [b for b in figures.bursts if b.threads]
    spent = [dict(burst.threads) for burst in bursts]
    busiest: dict[str, float] = {}
    for by_kind in spent:
        for group, per_job in by_kind.items():
            busiest[group] = max(busiest.get(group, 0.0), per_job)
    shown = sorted(busiest, key=lambda group: -busiest[group])[:THREAD_KINDS_SHOWN]
    header = ["thread", *(f"{b.workers} w, {fmt(b.sleep_s)}" for b in bursts)]
    rows = [[group, *(fmt(by_kind.get(group, 0.0)) for by_kind in spent)] for group in shown]
    if len(busiest) > len(shown):
        rows.append(["(the others)", *(fmt(sum(s for g, s in by_kind.items() if g not in shown)) for by_kind in spent)])
    return header, rows if bursts else []


def _stream_rows(figures: UtilizationFigures) -> tuple[list[str], list[list[str]]]:
    from gpurt.bench.runtime.measure import fmt_duration as fmt

    header = ["workers", "job", "rate", "jobs", "queue wait p50", "queue wait p95"]
    rows = [[str(s.workers), fmt(s.sleep_s), f"{s.rate_per_s:.1f}/s", str(s.completed), fmt(s.queue_wait_p50_s),
             fmt(s.queue_wait_p95_s)] for s in figures.streams]
    return header, rows


def _first_rows(figures: UtilizationFigures) -> tuple[list[str], list[list[str]]]:
    from gpurt.bench.runtime.measure import fmt_duration as fmt

    header = ["workers", "fresh platform to first result", "first job's run time", "warm run time"]
    rows = [[str(f.workers), fmt(f.cold_to_first_result_s), fmt(f.first_run_s), fmt(f.warm_run_s)]
            for f in figures.first_jobs]
    return header, rows


def _tables(figures: UtilizationFigures, goals: list[Goal]) -> list[Table]:
    tables = []
    for title, (header, rows) in (("first european_option job on a fresh platform", _first_rows(figures)),
                                  ("bursts: jobs published at once", _rows(figures)),
                                  ("scheduler CPU per job by thread", _thread_rows(figures)),
                                  ("steady stream at 80 % of capacity", _stream_rows(figures))):
        if rows:
            tables.append(figures_table(title, header[0], header[1:], [(row[0], row[1:]) for row in rows]))
    tables.append(goal_table(goals))
    return tables


def markdown(figures: UtilizationFigures, goals: list[Goal], date: str) -> str:
    """The BENCHMARKS.md section."""
    from gpurt.bench.runtime.measure import fmt_duration
    from gpurt.bench.runtime.report import goal_markdown, markdown_table

    lines = ["## Runtime: slot utilization", "",
             f"{device_line(date)} Bursts of `noop` jobs that sleep (no CPU while they run, like a GPU kernel "
             "seen from the host) published at once to a fresh local platform per worker count; utilization = "
             "jobs x duration / (workers x makespan), first publish to last result (docs/scheduler.md, "
             "\"Leases and flow control\"). Scheduler CPU per job: the gpu-scheduler process over each burst; "
             "Dask scheduler CPU per job: the Dask scheduler's own process, which the gpu-scheduler starts. "
             "By thread: the gpu-scheduler's CPU per job split by its threads (`GET /status/threads`; numbers in "
             "thread names replaced by N, so the job slots add up as `gpurt-job-N`; docs/scheduler.md, "
             "\"Per-job cost\"). "
             "Steady stream: jobs published evenly at 80 % of the "
             "workers' capacity; queue wait is the scheduler's own measure, publish to start. First job: a "
             "1,000,000-path `european_option` on the fresh platform, from asking for the platform (nothing "
             "started: emulator, scheduler, workers warming their kernels) to its result, and its run time "
             "against the same job warm (docs/scheduler.md, \"Warm workers\").", ""]
    if figures.dask_floor:
        floor = figures.dask_floor
        lines += [f"Floor: a bare Dask client, apart (its own Dask scheduler and worker processes, no platform "
                  f"running), spends {fmt_duration(floor.client_cpu_per_task_s)} of CPU per task submitted, "
                  f"waited for and fetched ({floor.tasks} tasks one at a time, "
                  f"{fmt_duration(floor.wall_per_task_s)} each end to end): the least a job that runs as a task of "
                  "its own costs the scheduler before Pub/Sub and the store (docs/scheduler.md, \"Per-job cost\").",
                  ""]
    for header, rows in (_first_rows(figures), _rows(figures), _thread_rows(figures), _stream_rows(figures)):
        if rows:
            lines += [*markdown_table(header[0], header[1:], [(row[0], row[1:]) for row in rows]), ""]
    lines += goal_markdown(goals)
    return "\n".join(lines)
