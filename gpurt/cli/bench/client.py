"""``gpurt bench client``: what the Python client costs per job against the CLI's path and the raw Pub/Sub client."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Final

import typer
from rich.table import Table

from gpurt.cli.bench.runtime import bench_date, bench_platform, device_line, figures_table, progress_bar, show_figures
from gpurt.cli.common import console, err_console, friendly_errors

if TYPE_CHECKING:
    from gpurt.bench.client import PathFigures
    from gpurt.bench.runtime.report import Rows

SECTION: Final = "client"
LABELS: Final = {"raw": "raw google-cloud-pubsub", "cli": "CLI path (gpurt submit)", "client": "client (map + gather)"}


@friendly_errors
def bench_client(
    jobs: Annotated[int, typer.Option(min=10, max=100_000, help="noop jobs per path.")] = 1000,
    timeout: Annotated[float, typer.Option(min=10, help="Seconds each path may wait for its results.")] = 600.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    write: Annotated[bool, typer.Option("--write", help="Write the figures to BENCHMARKS.md.")] = False,
) -> None:
    """Submit and gather small jobs through the raw Pub/Sub client, the CLI's path and the client, on a fresh local
    platform: throughput and this process's CPU per job (goal: the client within 10% of the raw client)."""
    from gpurt.bench.client import PATHS, measure

    out = err_console if as_json else console
    with bench_platform(1, out) as platform, progress_bar(out) as progress:
        tasks = {path: progress.add_task(LABELS[path], total=jobs) for path in PATHS}
        runs = measure(platform.target(), jobs, timeout,
                       lambda path, done: progress.update(tasks[path], completed=done))
    document = [dataclasses.asdict(run) | {"jobs_per_s": run.jobs_per_s, "cpu_ms_per_job": run.cpu_ms_per_job}
                for run in runs]
    show_figures(document, [_table(runs)], as_json=as_json, section=SECTION,
                 markdown=_markdown(runs, bench_date()) if write else None, out=out)


def _rows(runs: list[PathFigures]) -> Rows:
    raw = next(run for run in runs if run.path == "raw")
    return [(LABELS[run.path], [f"{run.jobs_per_s:,.1f}", f"{run.cpu_ms_per_job:.2f}",
                                f"{run.cpu_ms_per_job / raw.cpu_ms_per_job - 1:+.0%}"]) for run in runs]


_COLUMNS: Final = ["jobs/s", "client CPU ms/job", "CPU vs raw"]


def _table(runs: list[PathFigures]) -> Table:
    from gpurt.bench.client import CLIENT_OVERHEAD_GOAL

    return figures_table(f"{runs[0].jobs:,} noop jobs per path, one local platform "
                         f"(goal: client CPU within {CLIENT_OVERHEAD_GOAL:.0%} of raw)", "path", _COLUMNS, _rows(runs))


def _markdown(runs: list[PathFigures], date: str) -> str:
    from gpurt.bench.client import CLIENT_OVERHEAD_GOAL
    from gpurt.bench.runtime.report import markdown_table

    lines = ["## Python client", "",
             f"{device_line(date)} {runs[0].jobs:,} noop jobs per path on one local "
             f"platform (one Dask worker); client CPU is the submitting process's, every thread. Goal: the client "
             f"within {CLIENT_OVERHEAD_GOAL:.0%} of the raw client's CPU per job (docs/python-api.md).", "",
             *markdown_table("path", _COLUMNS, _rows(runs))]
    return "\n".join(lines)
