"""``gpurt bench queues``: desks sharing the slots on a fresh local platform - urgent past a backlog, shares, a cap."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Final

import typer

from gpurt.cli.bench.runtime import bench_date, bench_platform, device_line, figures_table, progress_bar, show_figures
from gpurt.cli.common import UserError, console, err_console, friendly_errors

if TYPE_CHECKING:
    from rich.table import Table

    from gpurt.bench.queues import QueueFigures
    from gpurt.bench.runtime.report import Rows

SECTION: Final = "queues"
WORKERS: Final = 2  # the goals are for 2 workers
_COLUMNS: Final = ["figure", "goal", "met"]


@friendly_errors
def bench_queues(
    backlog: Annotated[int, typer.Option(min=10, max=100_000, help="Batch jobs (50 ms noops) waiting on one "
                                         "desk's queue while the urgent jobs are published.")] = 5000,
    urgent: Annotated[int, typer.Option(min=1, max=1000, help="Urgent jobs, one after another.")] = 20,
    window: Annotated[float, typer.Option(min=1, help="Seconds over which two backlogged desks' shares of the "
                                                      "starts are counted.")] = 120.0,
    slow_rate: Annotated[float, typer.Option(min=1, help="Jobs per second the slower desk publishes; the other "
                                                         "publishes ten times as many.")] = 25.0,
    cap_window: Annotated[float, typer.Option(min=1, help="Seconds a capped desk's places are sampled.")] = 20.0,
    timeout: Annotated[float, typer.Option(min=10, help="Seconds any one wait may take.")] = 300.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    write: Annotated[bool, typer.Option("--write", help="Write the figures to BENCHMARKS.md (refused on a "
                                                        "loaded machine).")] = False,
) -> None:
    """Desks sharing the slots of a fresh local platform with 2 workers (docs/scheduler.md, "Queues"): an urgent
    job's publish-to-start past a backlog of batch jobs (goal p95 ≤ 1 s), two backlogged desks of equal weight,
    one publishing ten times faster (goal 45-55 % of the starts each), and a capped desk (never above its cap)."""
    from gpurt.bench.markdown import load_start
    from gpurt.bench.queues import BENCH_QUEUES, measure

    start = load_start()
    if write and (refusal := start.refusal()):
        raise UserError(refusal)
    out = err_console if as_json else console
    with bench_platform(WORKERS, out, queues=BENCH_QUEUES) as platform, progress_bar(out) as progress:
        totals = {"backlog": backlog, "urgent": urgent, "share": int(window), "cap": int(cap_window)}
        tasks = {phase: progress.add_task(phase, total=total) for phase, total in totals.items()}
        figures = measure(platform.target(), backlog=backlog, urgent_jobs=urgent, window_s=window,
                          slow_rate=slow_rate, cap_window_s=cap_window, timeout_s=timeout,
                          progress=lambda phase, done: progress.update(tasks[phase], completed=done))
    load = start.window()
    document = _document(figures) | {"load_average": load.as_json()}
    markdown = None
    if write:
        if refusal := load.refusal():
            raise UserError(refusal)
        markdown = _markdown(figures, bench_date(), load.note())
    show_figures(document, [_table(figures)], as_json=as_json, section=SECTION, markdown=markdown, out=out)
    if not as_json:
        out.print(f"goals {'met' if figures.met else 'NOT met'}; {load.note()}")


def _document(figures: QueueFigures) -> dict[str, object]:
    from gpurt.bench.queues import FAST_DESK, SLOW_DESK

    u, s, c = figures.urgent, figures.share, figures.cap
    return {
        "urgent": {"backlog": u.backlog, "waits_s": u.waits_s, "p50_s": u.p50_s, "p95_s": u.p95_s,
                   "backlog_waiting_after": u.backlog_waiting_after, "met": u.met},
        "share": {"window_s": s.window_s, "published": s.published, "started": s.started,
                  "share": {desk: s.share(desk) for desk in (FAST_DESK, SLOW_DESK)},
                  "both_backlogged": s.both_backlogged, "met": s.met},
        "cap": {"window_s": c.window_s, "cap": c.cap, "most_capped": c.most_capped,
                "most_uncapped": c.most_uncapped, "samples": c.samples, "started": c.started, "met": c.met},
        "met": figures.met,
    }


def _rows(figures: QueueFigures) -> Rows:
    from gpurt.bench.queues import CAPPED_DESK, FAST_DESK, SHARE_GOAL, SLOW_DESK, URGENT_P95_GOAL_S
    from gpurt.bench.runtime.measure import fmt_duration

    u, s, c = figures.urgent, figures.share, figures.cap
    low, high = SHARE_GOAL

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{100 * value:.1f} %"

    def met(ok: bool) -> str:
        return "yes" if ok else "NO"
    return [
        (f"urgent publish-to-start p50, {len(u.waits_s)} jobs", [fmt_duration(u.p50_s), "", ""]),
        (f"urgent publish-to-start p95, {len(u.waits_s)} jobs", [fmt_duration(u.p95_s),
                                                                 f"≤ {fmt_duration(URGENT_P95_GOAL_S)}", met(u.met)]),
        (f"batch jobs still waiting in the broker after the last urgent one (of {u.backlog:,})",
         [f"{u.backlog_waiting_after:,}", "> 0", met(u.backlog_waiting_after > 0)]),
        (f"{FAST_DESK} share of starts ({s.published[FAST_DESK]:,} published)",
         [pct(s.share(FAST_DESK)), f"{100 * low:g}-{100 * high:g} %", met(s.met)]),
        (f"{SLOW_DESK} share of starts ({s.published[SLOW_DESK]:,} published)",
         [pct(s.share(SLOW_DESK)), f"{100 * low:g}-{100 * high:g} %", met(s.met)]),
        ("samples with both desks backlogged", [pct(s.both_backlogged), "", ""]),
        (f"{CAPPED_DESK} most slots held ({c.samples} samples)", [str(c.most_capped), f"≤ {c.cap}", met(c.met)]),
        ("an uncapped desk beside it, most slots held", [str(c.most_uncapped), "", ""]),
    ]


def _table(figures: QueueFigures) -> Table:
    return figures_table("desks sharing the slots", "measure", _COLUMNS, _rows(figures))


def _markdown(figures: QueueFigures, date: str, load: str) -> str:
    from gpurt.bench.queues import BATCH_SLEEP_S, FAST_FACTOR
    from gpurt.bench.runtime.report import markdown_table

    s = figures.share
    lines = ["## Queues: urgent work, shares and caps (`gpurt bench queues`)", "",
             f"{device_line(date)} {load}. A fresh local platform with {WORKERS} Dask workers and four desk queues "
             "of weight 1 (one capped at one slot) besides default and urgent (docs/scheduler.md, \"Queues\"); "
             f"batch jobs are noops of {BATCH_SLEEP_S * 1000:g} ms, packed as the scheduler packs tiny jobs. "
             f"Urgent: {figures.urgent.backlog:,} batch jobs queued on one desk, then {len(figures.urgent.waits_s)} "
             "urgent jobs one after another, publish to start as the scheduler measures it. Shares: two desks "
             f"publishing {FAST_FACTOR}x apart for {s.window_s:g} s, starts counted by the scheduler's "
             "queue_started_total. Cap: the capped desk and an uncapped one backlogged for "
             f"{figures.cap.window_s:g} s, GET /status sampled every 100 ms.", "",
             *markdown_table("measure", _COLUMNS, _rows(figures)), "",
             f"goals {'met' if figures.met else 'NOT met'}."]
    return "\n".join(lines)
