"""How the benches report: one way to print figures (JSON or tables) and write their BENCHMARKS.md section,
and the client's and the emulator's rows, with ratios checked against figures worked out here."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from gpurt.bench import markdown as benchmarks_md
from gpurt.bench.broker import BrokerFigures
from gpurt.bench.client import PathFigures
from gpurt.cli.bench import broker as bench_emulator
from gpurt.cli.bench import client as bench_client
from gpurt.cli.bench.runtime import figures_table, show_figures
from runtime.local.broker.brokers import Broker

ROWS = [("raw", ["1.0", "2.0"]), ("client", ["3.0", "4.0"])]


def _text(table: object) -> str:
    console = Console(width=200, record=True)
    console.print(table)
    return console.export_text()


def test_json_goes_to_stdout_alone_and_nothing_is_written_without_write(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[tuple[str, str]] = []
    monkeypatch.setattr(benchmarks_md, "write_section", lambda name, text: written.append((name, text)))
    show_figures({"a": 1}, [figures_table("t", "path", ["x", "y"], ROWS)], as_json=True, section="s", markdown=None,
                 out=Console(stderr=True))
    assert json.loads(capsys.readouterr().out) == {"a": 1} and written == []


def test_tables_are_printed_and_the_markdown_becomes_the_section(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[tuple[str, str]] = []
    monkeypatch.setattr(benchmarks_md, "write_section", lambda name, text: written.append((name, text)))
    show_figures({"a": 1}, [figures_table("the title", "path", ["x", "y"], ROWS)], as_json=False, section="s",
                 markdown="## S", out=Console(stderr=True))
    out = capsys.readouterr()
    assert "the title" in out.out and "client" in out.out and '"a"' not in out.out
    assert written == [("s", "## S")] and "written to BENCHMARKS.md (section s)" in out.err


def test_emulator_rows_compare_each_broker_with_the_official_one() -> None:
    runs = [BrokerFigures(Broker.BUILTIN, False, 100, 3000.0, 600.0),
            BrokerFigures(Broker.BUILTIN, True, 100, 1500.0, 300.0),
            BrokerFigures(Broker.OFFICIAL, False, 100, 1000.0, 400.0)]
    markdown = bench_emulator._markdown(runs, "2026-01-01 00:00 UTC")
    assert "| builtin, in memory | 3,000 | 3.00x | 600 | 1.50x |" in markdown  # 3000/1000, 600/400
    assert "| builtin, durable | 1,500 | 1.50x | 300 | 0.75x |" in markdown
    assert "| official | 1,000 | 1.00x | 400 | 1.00x |" in markdown
    assert "builtin, durable" in _text(bench_emulator._table(runs))


def test_client_rows_give_each_paths_cpu_against_the_raw_clients() -> None:
    runs = [PathFigures("raw", 1000, 10.0, 2.0), PathFigures("client", 1000, 8.0, 2.2)]
    markdown = bench_client._markdown(runs, "2026-01-01 00:00 UTC")
    # 1000 jobs / 10 s; 2 s CPU / 1000 jobs = 2 ms; the client's 2.2 ms is 10% more
    assert "| raw google-cloud-pubsub | 100.0 | 2.00 | +0% |" in markdown
    assert "| client (map + gather) | 125.0 | 2.20 | +10% |" in markdown
    assert "+10%" in _text(bench_client._table(runs))
