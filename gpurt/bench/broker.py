"""``gpurt bench emulator``: the builtin Pub/Sub emulator's throughput, in memory and durable, against the
official one's."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Final

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from gpurt.common import console, err_console, friendly_errors, print_json

if TYPE_CHECKING:
    from bench.broker import BrokerFigures

SECTION: Final = "emulator"


@friendly_errors
def bench_emulator(
    messages: Annotated[int, typer.Option(min=100, max=1_000_000, help="Messages per measurement.")] = 10_000,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    write: Annotated[bool, typer.Option("--write", help="Write the figures to BENCHMARKS.md.")] = False,
) -> None:
    """Publish, and publish + streaming pull + ack, through the real client on each broker: the builtin in memory
    and durable (the local platform's default), and the official one (the baseline)."""
    from bench.broker import measure
    from local_platform.broker.brokers import Broker

    runs: list[BrokerFigures] = []
    out = err_console if as_json else console
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=out) as progress:
        for broker, durable in ((Broker.BUILTIN, False), (Broker.BUILTIN, True), (Broker.OFFICIAL, False)):
            task = progress.add_task(f"{_label(broker, durable)}: publish, then publish + pull", total=2 * messages)
            phase = {"offset": 0}

            def advance(done: int, task: int = task, phase: dict = phase) -> None:
                progress.update(task, completed=phase["offset"] + done)
                if done == messages:
                    phase["offset"] = messages

            runs.append(measure(broker, messages, advance, durable=durable))
            progress.update(task, completed=2 * messages)
    if as_json:
        print_json([dataclasses.asdict(run) | {"broker": str(run.broker)} for run in runs])
    else:
        console.print(_table(runs))
    if write:
        from bench.markdown import write_section

        write_section(SECTION, _markdown(runs, datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")))
        out.print(f"written to BENCHMARKS.md (section {SECTION})")


def _label(broker: str, durable: bool) -> str:
    """A run's name in the table: the builtin says whether it kept its data on disk."""
    if broker != "builtin":
        return str(broker)
    return "builtin, durable" if durable else "builtin, in memory"


def _rows(runs: list[BrokerFigures]) -> list[list[str]]:
    baseline = next(run for run in runs if run.broker == "official")
    return [[_label(run.broker, run.durable), f"{run.publish_per_s:,.0f}",
             f"{run.publish_per_s / baseline.publish_per_s:.2f}x", f"{run.end_to_end_per_s:,.0f}",
             f"{run.end_to_end_per_s / baseline.end_to_end_per_s:.2f}x"] for run in runs]


_COLUMNS: Final = ["broker", "publish msg/s", "vs official", "publish+pull+ack msg/s", "vs official"]


def _table(runs: list[BrokerFigures]) -> Table:
    table = Table(title=f"Pub/Sub emulators, {runs[0].messages:,} messages of 100 bytes, real client")
    for column in _COLUMNS:
        table.add_column(column, justify="left" if column == "broker" else "right")
    for row in _rows(runs):
        table.add_row(*row)
    return table


def _markdown(runs: list[BrokerFigures], date: str) -> str:
    from bench.kernels.runner import machine
    from bench.markdown import load_note

    lines = [
        "## Pub/Sub emulators (`gpurt bench emulator`)",
        "",
        f"Device: {machine()}, no GPU; {load_note()}; {date}. {runs[0].messages:,} messages of 100 bytes per "
        "figure through google-cloud-pubsub, each broker in its own process; the official emulator is the "
        "baseline of the same run. Durable: `--data-dir`, the local platform's default (SQLite, WAL, "
        "synchronous=FULL: each answered request is fsynced, requests arriving together share one fsync).",
        "",
        "| " + " | ".join(_COLUMNS) + " |",
        "| " + " | ".join(["---"] + ["---:"] * (len(_COLUMNS) - 1)) + " |",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(runs)]
    return "\n".join(lines)
