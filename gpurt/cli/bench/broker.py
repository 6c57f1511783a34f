"""``gpurt bench emulator``: the builtin Pub/Sub emulator's throughput, in memory and durable, against the
official one's."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Final

import typer
from rich.table import Table

from gpurt.cli.bench.runtime import bench_date, device_line, figures_table, progress_bar, show_figures
from gpurt.cli.common import console, err_console, friendly_errors

if TYPE_CHECKING:
    from gpurt.bench.broker import BrokerFigures
    from gpurt.bench.runtime.report import Rows

SECTION: Final = "emulator"


@friendly_errors
def bench_emulator(
    messages: Annotated[int, typer.Option(min=100, max=1_000_000, help="Messages per measurement.")] = 10_000,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    write: Annotated[bool, typer.Option("--write", help="Write the figures to BENCHMARKS.md.")] = False,
) -> None:
    """Publish, and publish + streaming pull + ack, through the real client on each broker: the builtin in memory
    and durable (the local platform's default), and the official one (the baseline)."""
    from gpurt.bench.broker import measure
    from runtime.local.broker.brokers import Broker

    runs: list[BrokerFigures] = []
    out = err_console if as_json else console
    with progress_bar(out) as progress:
        for broker, durable in ((Broker.BUILTIN, False), (Broker.BUILTIN, True), (Broker.OFFICIAL, False)):
            task = progress.add_task(f"{_label(broker, durable)}: publish, then publish + pull", total=2 * messages)
            phase = {"offset": 0}

            def advance(done: int, task: int = task, phase: dict = phase) -> None:
                progress.update(task, completed=phase["offset"] + done)
                if done == messages:
                    phase["offset"] = messages

            runs.append(measure(broker, messages, advance, durable=durable))
            progress.update(task, completed=2 * messages)
    show_figures([dataclasses.asdict(run) | {"broker": str(run.broker)} for run in runs], [_table(runs)],
                 as_json=as_json, section=SECTION, markdown=_markdown(runs, bench_date()) if write else None, out=out)


def _label(broker: str, durable: bool) -> str:
    """A run's name in the table: the builtin says whether it kept its data on disk."""
    if broker != "builtin":
        return str(broker)
    return "builtin, durable" if durable else "builtin, in memory"


def _rows(runs: list[BrokerFigures]) -> Rows:
    baseline = next(run for run in runs if run.broker == "official")
    return [(_label(run.broker, run.durable), [f"{run.publish_per_s:,.0f}",
                                               f"{run.publish_per_s / baseline.publish_per_s:.2f}x",
                                               f"{run.end_to_end_per_s:,.0f}",
                                               f"{run.end_to_end_per_s / baseline.end_to_end_per_s:.2f}x"])
            for run in runs]


_COLUMNS: Final = ["publish msg/s", "vs official", "publish+pull+ack msg/s", "vs official"]


def _table(runs: list[BrokerFigures]) -> Table:
    return figures_table(f"Pub/Sub emulators, {runs[0].messages:,} messages of 100 bytes, real client", "broker",
                         _COLUMNS, _rows(runs))


def _markdown(runs: list[BrokerFigures], date: str) -> str:
    from gpurt.bench.runtime.report import markdown_table

    lines = [
        "## Pub/Sub emulators (`gpurt bench emulator`)",
        "",
        f"{device_line(date)} {runs[0].messages:,} messages of 100 bytes per "
        "figure through google-cloud-pubsub, each broker in its own process; the official emulator is the "
        "baseline of the same run. Durable: `--data-dir`, the local platform's default (SQLite, WAL, "
        "synchronous=FULL: each answered request is fsynced, requests arriving together share one fsync).",
        "",
        *markdown_table("broker", _COLUMNS, _rows(runs)),
    ]
    return "\n".join(lines)
