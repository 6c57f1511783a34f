"""``gpurt bench runtime``: end-to-end throughput, queue wait and scheduler overhead; soak mode."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpurt.cli.common import UserError, console, err_console, friendly_errors, print_json

if TYPE_CHECKING:
    from gpurt.bench.runtime.end_to_end import RuntimeFigures
    from gpurt.bench.runtime.goals import Goal
    from gpurt.bench.runtime.report import LabelledBaseline, Rows
    from runtime.local import LocalPlatform
    from runtime.protocol.queues import QueueSpec


# Worker counts measured when none are given: enough to see whether throughput grows with workers.
DEFAULT_WORKER_COUNTS: Final = (1, 2, 4)


@friendly_errors
def bench_runtime(
    jobs: Annotated[int, typer.Option(min=1, max=100_000, help="noop jobs in the throughput batch.")] = 1000,
    workers: Annotated[list[int] | None, typer.Option(
        min=1, max=64, help="Dask workers of the benchmark's platform; repeat to compare worker counts "
        f"(default: {', '.join(map(str, DEFAULT_WORKER_COUNTS))}; soak: one per GPU, else 2).")] = None,
    soak_s: Annotated[float | None, typer.Option("--soak", min=1, help="Soak for this many seconds instead.")] = None,
    rate: Annotated[float, typer.Option(min=0.01, help="Soak: jobs published per second.")] = 5.0,
    csv_path: Annotated[Path | None, typer.Option("--csv", help="Soak: CSV file of per-job rows.")] = None,
    trace: Annotated[bool, typer.Option(
        "--tracemalloc", help="Soak: trace the scheduler's allocations and print the sites that grew "
        "from the middle of the run to its end (slows the scheduler).")] = False,
    rejected_every: Annotated[int, typer.Option(
        "--rejected-every", min=0, help="Soak: make every Nth message a request the scheduler rejects (32 KB), "
        "so the memory trend covers rejections too; 0: none.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures and goals as JSON.")] = False,
    write: Annotated[bool, typer.Option("--write", help="Write the figures to BENCHMARKS.md.")] = False,
    profile: Annotated[bool, typer.Option(
        "--profile", help="Sample the scheduler with py-spy: where a job slot's time goes.")] = False,
    baseline: Annotated[Path | None, typer.Option(
        "--baseline", help="The --json output of an earlier run, shown as 'before'.")] = None,
    baseline_label: Annotated[str | None, typer.Option(
        help="What the baseline measured (default: its file name).")] = None,
) -> None:
    """Measure the runtime on fresh local platforms (free ports, temporary state), one per worker count."""
    if soak_s is not None and csv_path is None:
        raise UserError("--soak needs --csv FILE")
    if trace and soak_s is None:
        raise UserError("--tracemalloc goes with --soak")
    if rejected_every and soak_s is None:
        raise UserError("--rejected-every goes with --soak")
    if soak_s is not None and csv_path is not None:
        if workers is not None and len(workers) > 1:
            raise UserError("--soak runs one platform: give --workers at most once")
        _soak_run(workers[0] if workers else None, soak_s, rate, csv_path, write=write, trace=trace,
                  rejected_every=rejected_every)
        return
    _throughput(jobs, sorted(set(workers or DEFAULT_WORKER_COUNTS)),
                _Options(as_json, write, profile, baseline, baseline_label))


@contextmanager
def bench_platform(workers: int | None, out: Console,
                   scheduler_env: Callable[[Path], dict[str, str]] | None = None,
                   ready_timeout_s: float | None = None,
                   queues: Sequence[QueueSpec] | None = None) -> Iterator[LocalPlatform]:
    """A local platform on free ports and temporary state, stopped on exit.

    ``scheduler_env`` gives extra scheduler settings from the platform's temporary folder;
    ``ready_timeout_s`` replaces the platform's start-up budget; ``queues``, if given, are the request queues it runs
    (default: the built-in ones).
    """
    from runtime.local import LocalConfig, LocalPlatform

    with tempfile.TemporaryDirectory(prefix="gpurt-bench-") as tmp:
        extra = scheduler_env(Path(tmp)) if scheduler_env else {}
        config = LocalConfig(workers=workers, port=0, emulator_port=0, scheduler_env=extra)
        if ready_timeout_s is not None:
            config = dataclasses.replace(config, ready_timeout_s=ready_timeout_s)
        if queues is not None:
            config = dataclasses.replace(config, queues=tuple(queues))
        platform = LocalPlatform(Path(tmp), config)
        with out.status(f"starting a local platform ({workers or 'default'} workers) for the benchmark…") as spinner:
            platform.up(on_step=lambda step: spinner.update(step + "…"))
        try:
            yield platform
        finally:
            with out.status("stopping the benchmark platform…"):
                platform.down()


def progress_bar(out: Console = console) -> Progress:
    """A progress bar with a count and the time elapsed, on ``out``."""
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=out)


def bench_date() -> str:
    """Now, as a bench's figures are dated in their JSON and in BENCHMARKS.md."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def figures_table(title: str, first: str, columns: Sequence[str], rows: Rows) -> Table:
    """A table of figures for the terminal: a label column, then one right-aligned column per entry of
    ``columns``; the same rows ``gpurt.bench.runtime.report.markdown_table`` writes to BENCHMARKS.md."""
    table = Table(title=title)
    table.add_column(first)
    for column in columns:
        table.add_column(column, justify="right")
    for name, values in rows:
        table.add_row(name, *values)
    return table


def show_figures(document: object, tables: Sequence[Table], *, as_json: bool, section: str, markdown: str | None,
                 out: Console) -> None:
    """Print a bench's figures: ``document`` as JSON with ``--json`` (stdout carries it alone), else ``tables``;
    with ``--write`` (``markdown`` given), ``markdown`` becomes BENCHMARKS.md's section ``section``."""
    if as_json:
        print_json(document)
    else:
        for table in tables:
            console.print(table)
    if markdown is not None:
        from gpurt.bench.markdown import write_section

        write_section(section, markdown)
        out.print(f"written to BENCHMARKS.md (section {section})")


def _throughput(jobs: int, worker_counts: list[int], options: _Options) -> None:
    from gpurt.bench.runtime.end_to_end import measure
    from gpurt.bench.runtime.goals import judge
    from gpurt.bench.runtime.profile import ProfileError, py_spy
    from gpurt.bench.runtime.report import run_json

    baseline = _baseline(options)
    out = err_console if options.as_json else console  # with --json, stdout carries the JSON alone
    runs = []
    try:
        if options.profile:
            py_spy()  # before any platform starts
        with tempfile.TemporaryDirectory(prefix="gpurt-bench-profile-") as profiles:
            for workers in worker_counts:
                profile_to = Path(profiles, f"scheduler-{workers}.txt") if options.profile else None
                with bench_platform(workers, out) as platform, progress_bar(out) as progress:
                    task = progress.add_task(f"noop jobs end to end, {workers} worker(s)", total=jobs)
                    runs.append(measure(platform, jobs, on_progress=partial(_advance, progress, task),
                                        profile_to=profile_to))
    except ProfileError as exc:
        raise UserError(str(exc)) from None
    goals = judge(runs)
    date = bench_date()
    show_figures(run_json(jobs, date, runs, goals), _tables(runs, goals, baseline), as_json=options.as_json,
                 section="runtime", markdown=_runtime_markdown(runs, goals, baseline, date) if options.write else None,
                 out=out)


@dataclass(frozen=True)
class _Options:
    as_json: bool
    write: bool
    profile: bool
    baseline: Path | None
    baseline_label: str | None


def _baseline(options: _Options) -> LabelledBaseline | None:
    from gpurt.bench.runtime.report import LabelledBaseline, read_baseline

    if options.baseline is None:
        return None
    try:
        baseline = read_baseline(options.baseline)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return LabelledBaseline(options.baseline_label or options.baseline.name, baseline)


def _advance(progress: Progress, task: TaskID, done: int) -> None:
    progress.update(task, completed=done)


def _tables(runs: list[RuntimeFigures], goals: list[Goal], baseline: LabelledBaseline | None) -> list[Table]:
    from gpurt.bench.runtime.report import (
        baseline_rows,
        cpu_rows,
        figure_rows,
        profile_of,
        stage_rows,
        worker_columns,
    )

    columns = worker_columns([r.workers for r in runs])
    tables = [figures_table(f"runtime benchmark ({runs[0].jobs} noop jobs at once)", "figure", columns,
                            figure_rows(runs))]
    if any(r.cpu for r in runs):
        tables.append(figures_table("CPU per job of each process", "process", columns, cpu_rows(runs)))
    if any(r.stages for r in runs):
        tables.append(figures_table("where a job slot's time goes (per job)", "stage", columns,
                                    stage_rows([profile_of(r) for r in runs])))
    tables.append(goal_table(goals))
    if baseline is not None:
        before = worker_columns([r.workers for r in baseline.baseline.runs])
        tables.append(figures_table(f"before: {baseline.label} ({baseline.baseline.date})", "figure", before,
                                    baseline_rows(baseline.baseline)))
        if any(r.cpu_per_job for r in baseline.baseline.runs):
            tables.append(figures_table(f"before: CPU per job of each process ({baseline.label})", "process",
                                        before, cpu_rows(baseline.baseline.runs)))
        if any(r.profile for r in baseline.baseline.runs):
            tables.append(figures_table(f"before: where a job slot's time goes ({baseline.label})", "stage",
                                        before, stage_rows([profile_of(r) for r in baseline.baseline.runs])))
    return tables


def _runtime_markdown(runs: list[RuntimeFigures], goals: list[Goal], baseline: LabelledBaseline | None,
                      date: str) -> str:
    from gpurt.bench.runtime.report import (
        baseline_rows,
        cpu_rows,
        figure_rows,
        goal_markdown,
        markdown_table,
        profile_of,
        stage_rows,
        worker_columns,
    )

    columns = worker_columns([r.workers for r in runs])
    lines = [
        "## Runtime: end-to-end throughput and scheduler overhead", "",
        f"{device_line(date)} {runs[0].jobs} `noop` jobs published at once through "
        "emulator, scheduler and a Dask LocalCluster, for each worker count on a fresh local platform. Dask alone: "
        "the same batch on a LocalCluster of the same size in the same run, all at once through Dask's own client, "
        "and one job per worker at a time through the scheduler's client - the most the scheduler's flow control "
        "(no more messages than slots, one slot per worker) lets Dask do, so its share of the batch is the ceiling "
        "of end to end (docs/scheduler.md, \"Per-job cost\"). On a machine of few cores the processes share them, "
        "so the load average says how far a run was bound by CPU rather than by the path's latency. "
        "Queue wait is the scheduler's own measure, so in a burst it is mostly waiting for a free slot.",
        "", *markdown_table("figure", columns, figure_rows(runs)), "", *goal_markdown(goals)]
    if any(r.cpu for r in runs):
        lines += ["", "CPU per job of each process end to end (user + system time over the run; on 2 cores, "
                  "1000 jobs/s would leave 2 ms per job to all of them together):", "",
                  *markdown_table("process", columns, cpu_rows(runs))]
    if any(r.stages for r in runs):
        lines += ["", "Where a job slot's time goes end to end (py-spy samples of the scheduler's slot threads "
                  "during the run; per job, and share of the slot's time):", "",
                  *markdown_table("stage", columns, stage_rows([profile_of(r) for r in runs]))]
    if baseline is not None:
        before = worker_columns([r.workers for r in baseline.baseline.runs])
        lines += ["", f"Before: {baseline.label}, measured {baseline.baseline.date} with "
                  f"{baseline.baseline.jobs} jobs on the same machine:", "",
                  *markdown_table("figure", before, baseline_rows(baseline.baseline))]
        if any(r.cpu_per_job for r in baseline.baseline.runs):
            lines += ["", *markdown_table("process", before, cpu_rows(baseline.baseline.runs))]
        if any(r.profile for r in baseline.baseline.runs):
            lines += ["", *markdown_table("stage", before,
                                          stage_rows([profile_of(r) for r in baseline.baseline.runs]))]
    return "\n".join(lines)


def _soak_run(workers: int | None, seconds: float, rate: float, csv_path: Path, *, write: bool, trace: bool,
              rejected_every: int = 0) -> None:
    from gpurt.bench.runtime.soak import TRACE_READY_TIMEOUT_S, soak_growth, tracemalloc_env

    def trace_dir(tmp: Path) -> Path:
        return tmp / "tracemalloc"

    env = (lambda tmp: tracemalloc_env(trace_dir(tmp), seconds)) if trace else None
    with bench_platform(workers, console, env, TRACE_READY_TIMEOUT_S if trace else None) as platform:
        _soak(platform, seconds, rate, csv_path, write, rejected_every)
        if trace:  # while the scheduler still runs: its exit snapshot comes after Dask's state is gone
            report = soak_growth(trace_dir(platform.directory))
            console.print(report, markup=False, highlight=False, soft_wrap=True)
            report_path = csv_path.with_name(csv_path.name + ".tracemalloc.txt")
            report_path.write_text(report + "\n", encoding="utf-8")
            console.print(f"tracemalloc growth: {report_path}")


def _soak(platform: LocalPlatform, seconds: float, rate: float, csv_path: Path, write: bool,
          rejected_every: int = 0) -> None:
    from gpurt.bench.runtime.measure import fmt_duration as fmt
    from gpurt.bench.runtime.soak import soak

    with progress_bar() as progress:
        task = progress.add_task(f"soak at {rate:g} jobs/s", total=None)
        summary = soak(platform, seconds, rate, csv_path, rejected_every=rejected_every,
                       on_progress=lambda sent, done: progress.update(task, completed=done,
                                                                      description=f"soak: {sent} sent"))
    rows = [("duration", f"{summary.duration_s:.0f} s"), ("published", str(summary.published)),
            ("completed", str(summary.completed)), ("retries", str(summary.retries)),
            ("latency p50 / p95", f"{fmt(summary.latency_p50_s)} / {fmt(summary.latency_p95_s)}"),
            ("dead-lettered", str(summary.dlq_count)), ("scheduler memory (RSS)", summary.rss.verdict()),
            ("CSV", str(csv_path))]
    for name, value in rows:
        console.print(f"{name}: {value}")
    if write:
        from gpurt.bench.markdown import write_section

        date = bench_date()
        lines = ["## Runtime: soak", "", f"{device_line(date)} Soak: noop jobs at {rate:g}/s for {seconds:g} s"
                 f"{f', every {rejected_every}th rejected' if rejected_every else ''}.", "",
                 "| figure | value |", "| --- | --- |", *(f"| {name} | {value} |" for name, value in rows)]
        write_section("runtime-soak", "\n".join(lines))
        console.print("written to BENCHMARKS.md (section runtime-soak)")


def device_line(date: str) -> str:
    """The sentence a BENCHMARKS.md section starts with: machine, load average, date."""
    from gpurt.bench.kernels.runner import machine
    from gpurt.bench.markdown import load_note

    return f"Device: {machine()}, no GPU; {load_note()}; {date}."


def goal_table(goals: Sequence[Goal]) -> Table:
    """The goals of a bench, each with its target, what was measured and whether it was met."""
    table = Table(title="goals")
    for column in ("goal", "target", "measured", "met"):
        table.add_column(column)
    for goal in goals:
        table.add_row(goal.name, goal.target, goal.measured, "yes" if goal.met else "[red]no[/red]")
    return table
