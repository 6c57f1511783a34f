"""``gpurt bench runtime``: end-to-end throughput, queue wait and scheduler overhead; soak mode."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from runtime.cli.common import UserError, console, friendly_errors

if TYPE_CHECKING:
    from runtime.local import LocalPlatform


@friendly_errors
def bench_runtime(
    jobs: Annotated[int, typer.Option(min=1, max=100_000, help="noop jobs in the throughput batch.")] = 200,
    workers: Annotated[int | None, typer.Option(
        min=1, help="Dask workers of the benchmark's platform (default: one per GPU, else 2).")] = None,
    soak_s: Annotated[float | None, typer.Option("--soak", min=1, help="Soak for this many seconds instead.")] = None,
    rate: Annotated[float, typer.Option(min=0.01, help="Soak: jobs published per second.")] = 5.0,
    csv_path: Annotated[Path | None, typer.Option("--csv", help="Soak: CSV file of per-job rows.")] = None,
    write: Annotated[bool, typer.Option("--write", help="Write the figures to BENCHMARKS.md.")] = False,
) -> None:
    """Measure the runtime on a fresh local platform (free ports, temporary state), then stop it."""
    from runtime.local import LocalConfig, LocalPlatform

    if soak_s is not None and csv_path is None:
        raise UserError("--soak needs --csv FILE")
    with tempfile.TemporaryDirectory(prefix="gpurt-bench-") as tmp:
        platform = LocalPlatform(Path(tmp), LocalConfig(workers=workers, port=0, emulator_port=0))
        with console.status("starting a local platform for the benchmark…") as spinner:
            platform.up(on_step=lambda step: spinner.update(step + "…"))
        try:
            if soak_s is not None and csv_path is not None:
                _soak(platform, soak_s, rate, csv_path, write)
            else:
                _throughput(platform, jobs, write)
        finally:
            with console.status("stopping the benchmark platform…"):
                platform.down()


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console)


def _throughput(platform: LocalPlatform, jobs: int, write: bool) -> None:
    from runtime.bench.measure import fmt_duration as fmt
    from runtime.bench.runtime_bench import measure

    with _progress() as progress:
        task = progress.add_task("noop jobs end to end", total=jobs)
        figures = measure(platform, jobs, on_progress=lambda done: progress.update(task, completed=done))
    rows = [
        ("jobs completed", f"{figures.completed}/{figures.jobs}"),
        ("end-to-end throughput", f"{figures.e2e_jobs_per_s:.1f} jobs/s"),
        ("queue wait p50 / p95", f"{fmt(figures.queue_wait_p50_s)} / {fmt(figures.queue_wait_p95_s)}"),
        ("publish→result latency p50 / p95", f"{fmt(figures.latency_p50_s)} / {fmt(figures.latency_p95_s)}"),
        ("backend alone (Dask LocalCluster)", f"{figures.direct_jobs_per_s:.1f} jobs/s"),
        ("scheduler + Pub/Sub overhead per job", fmt(figures.overhead_per_job_s)),
        ("backend-alone / end-to-end throughput", f"{figures.throughput_ratio:.2f}x"),
    ]
    table = Table(title=f"runtime benchmark ({figures.workers} Dask workers, {figures.jobs} noop jobs at once)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    if write:
        _write_section(f"{figures.jobs} `noop` jobs published at once through emulator, scheduler and a "
                       f"{figures.workers}-worker Dask LocalCluster; queue wait is the scheduler's own measure, "
                       "so in a burst it is dominated by waiting for a free slot (flow control admits as many "
                       "messages as there are slots). Backend alone: the same batch submitted straight to a "
                       "LocalCluster of the same size in the same run.", rows)


def _soak(platform: LocalPlatform, seconds: float, rate: float, csv_path: Path, write: bool) -> None:
    from runtime.bench.measure import fmt_duration as fmt
    from runtime.bench.soak import soak

    with _progress() as progress:
        task = progress.add_task(f"soak at {rate:g} jobs/s", total=None)
        summary = soak(platform, seconds, rate, csv_path,
                       on_progress=lambda sent, done: progress.update(task, completed=done,
                                                                      description=f"soak: {sent} sent"))
    rows = [("duration", f"{summary.duration_s:.0f} s"), ("published", str(summary.published)),
            ("completed", str(summary.completed)), ("retries", str(summary.retries)),
            ("latency p50 / p95", f"{fmt(summary.latency_p50_s)} / {fmt(summary.latency_p95_s)}"),
            ("dead-lettered", str(summary.dlq_count)), ("CSV", str(csv_path))]
    for name, value in rows:
        console.print(f"{name}: {value}")
    if write:
        _write_section(f"Soak: noop jobs at {rate:g}/s for {seconds:g} s.", rows, section="runtime-soak",
                       heading="Runtime: soak")


def _write_section(what: str, rows: list[tuple[str, str]], section: str = "runtime",
                   heading: str = "Runtime: end-to-end throughput and scheduler overhead") -> None:
    from kernels.bench import machine
    from kernels.benchmarks_md import load_note, write_section

    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"## {heading}", "",
             f"Device: {machine()}, no GPU; {load_note()}; {date}. {what}", "",
             "| figure | value |", "| --- | --- |", *(f"| {name} | {value} |" for name, value in rows)]
    write_section(section, "\n".join(lines))
    console.print(f"written to BENCHMARKS.md (section {section})")
