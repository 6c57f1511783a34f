"""``gpurt bench cache``: publish to result of a result cache hit against a miss, on a fresh local platform."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Final

import typer

from gpurt.cli.bench.runtime import bench_date, bench_platform, device_line, figures_table, progress_bar, show_figures
from gpurt.cli.common import UserError, console, err_console, friendly_errors

if TYPE_CHECKING:
    from rich.table import Table

    from gpurt.bench.cache import CacheFigures
    from gpurt.bench.runtime.report import Rows

SECTION: Final = "result-cache"
_COLUMNS: Final = ["p50", "p95", "jobs"]


@friendly_errors
def bench_cache(
    jobs: Annotated[int, typer.Option(min=5, max=10_000, help="Computations, each run once (a miss) and "
                                                              "asked for again (a hit).")] = 50,
    timeout: Annotated[float, typer.Option(min=10, help="Seconds each job may wait for its result.")] = 300.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    write: Annotated[bool, typer.Option("--write", help="Write the figures to BENCHMARKS.md (refused on a "
                                                        "loaded machine).")] = False,
) -> None:
    """Publish-to-result of small european options run once (misses), then asked for again under new job ids
    (hits, answered from the result cache); one job at a time on a fresh local platform with one worker.
    Goal: a hit's p50 within 50 ms, no Dask run during the hits, every hit its miss's result bit for bit."""
    from gpurt.bench.cache import measure
    from gpurt.bench.markdown import load_start

    start = load_start()
    if write and (refusal := start.refusal()):
        raise UserError(refusal)
    out = err_console if as_json else console
    with bench_platform(1, out) as platform, progress_bar(out) as progress:
        tasks = {phase: progress.add_task(phase, total=jobs) for phase in ("miss", "hit")}
        figures = measure(platform.target(), jobs, timeout,
                          lambda phase, done: progress.update(tasks[phase], completed=done))
    window = start.window()
    document = dataclasses.asdict(figures) | {
        "miss_p50_s": figures.miss_p50_s, "hit_p50_s": figures.hit_p50_s, "hit_p95_s": figures.hit_p95_s,
        "met": figures.met, "load_average": window.as_json()}
    markdown = None
    if write:
        if refusal := window.refusal():
            raise UserError(refusal)
        markdown = _markdown(figures, bench_date())
    show_figures(document, [_table(figures)], as_json=as_json, section=SECTION, markdown=markdown, out=out)
    if not as_json:
        out.print(_verdict(figures))
        out.print(window.note())


def _rows(figures: CacheFigures) -> Rows:
    from gpurt.bench.runtime.measure import fmt_duration, percentile

    return [(name, [fmt_duration(percentile(values, 50)), fmt_duration(percentile(values, 95)), f"{len(values):,}"])
            for name, values in (("miss (runs on a worker)", figures.miss_s),
                                 ("hit (answered from the cache)", figures.hit_s))]


def _verdict(figures: CacheFigures) -> str:
    from gpurt.bench.cache import HIT_P50_GOAL_S

    return (f"goal (hit p50 ≤ {HIT_P50_GOAL_S * 1000:g} ms, no Dask run during the hits, results identical): "
            f"{'met' if figures.met else 'NOT met'}; Dask runs during the hits: {figures.runs_during_hits:g}; "
            f"every hit bit-identical to its miss: {'yes' if figures.identical else 'no'}")


def _table(figures: CacheFigures) -> Table:
    return figures_table("publish to result, one job at a time", "request", _COLUMNS, _rows(figures))


def _markdown(figures: CacheFigures, date: str) -> str:
    from gpurt.bench.cache import JOB_PARAMS
    from gpurt.bench.runtime.report import markdown_table

    lines = ["## Queues: result cache (`gpurt bench cache`)", "",
             f"{device_line(date)} {figures.jobs:,} european options ({JOB_PARAMS['paths']:,} paths, a seed each) "
             "on a fresh local platform with one Dask worker, one job at a time, publish to result as the "
             "client sees it: each run once (a miss), then asked for again under a new job id (a hit, answered "
             "from the result store at intake; docs/scheduler.md, \"Result cache\").", "",
             *markdown_table("request", _COLUMNS, _rows(figures)), "", _verdict(figures) + "."]
    return "\n".join(lines)
