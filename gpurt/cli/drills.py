"""``gpurt drill …``: the operator drills on the local platform."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Final

import typer

from gpurt.cli.common import LocalDirOption, console, err_console
from gpurt.cli.stacks import handled
from validation.drills import DEFAULT_LOAD_JOBS, DEFAULT_STORE_OUTAGE_S

drill_app = typer.Typer(help="Operator drills on the local platform (docs/runbooks/README.md).",
                        no_args_is_help=True)
DrillTimeoutOption = Annotated[float, typer.Option("--timeout", min=1, help="Seconds each wait of a drill may "
                                                   "take (the DLQ drill waits out 10 backoffs).")]
JobsOption = Annotated[int, typer.Option("--jobs", min=1, help="Jobs in the chaos drill's mixed load.")]
StoreOutageOption = Annotated[float, typer.Option(
    "--store-outage", min=1, help="Seconds the chaos drill's long result store outage lasts, at real time "
    "(5 minutes by default; a shorter one proves less).")]
WriteOption = Annotated[bool, typer.Option("--write", help="Write the chaos drill's figures to BENCHMARKS.md.")]
DEFAULT_DRILL_TIMEOUT_S = 600.0  # the DLQ drill's redelivery backoffs add up to minutes at full time scale


def _run_drills(names: list[str], timeout_s: float, local_dir: Path | None, as_json: bool,
                jobs: int = DEFAULT_LOAD_JOBS, write: bool = False,
                store_outage_s: float = DEFAULT_STORE_OUTAGE_S) -> None:
    from gpurt.bench.chaos import write_benchmarks
    from gpurt.cli.render import figures_table
    from runtime.local.platform import LocalPlatform
    from validation.drills.base import DrillContext
    from validation.drills.runner import run_drill

    platform = LocalPlatform(local_dir)
    platform.running_state()  # fails with "start it with gpurt local up" when it is not running
    results = []
    with err_console.status("drilling…") as status:
        ctx = DrillContext(platform, timeout_s, on_step=lambda message: status.update(message), jobs=jobs,
                           store_outage_s=store_outage_s)
        for name in names:
            status.update(f"drill {name}…")
            result = run_drill(name, ctx)
            results.append(result)
            if not as_json:
                mark = "[green]PASS[/]" if result.passed else "[bold red]FAIL[/]"
                console.print(f"{mark} {name} ({result.duration_s:.1f}s)")
                for line in result.evidence:
                    console.print(f"   • {line}")
                if result.failure:
                    console.print(f"   [red]✗ {result.failure}[/]")
                if result.figures:
                    console.print(figures_table(result))
            if write and result.figures:
                write_benchmarks(result)
                err_console.print(f"{name}: figures written to BENCHMARKS.md")
    if as_json:
        typer.echo(json.dumps([r.model_dump() for r in results], indent=2))
    if not all(r.passed for r in results):
        raise typer.Exit(1)


# Names and one-line help of the drills (validation.drills.runner.DRILLS runs them; a test keeps both in step).
DRILL_HELP: Final = {
    "drain-upgrade": "Drain, restart the scheduler, resume: no job lost or run twice, no redelivery.",
    "evict-pool": "Force-evict a pool while it runs jobs, restore it: every job still finishes once.",
    "dlq": "Poison job: 5 deliveries, dead-lettered, replayed, dead-lettered again; cleans up after itself.",
    "leader": "Leader crash takeover and stuck-lock forced release: across replica processes on the lease "
              "file with --replicas 2+, else at the scheduler's LeaseStore seam.",
    "alerts": "Provoke each alert's condition (backlog, failures, dead letters, workers down, evictions, "
              "reclaimer errors, no leader with --replicas 2+): time to fire, notify and resolve per rule.",
    # Last: it ends by restarting the broker (on the official emulator that drops whatever other drills left).
    "chaos": "Mixed load while a worker, a replica, intake, a replica's API (a connection flood: its probes "
             "must all be answered) and the result store (for seconds, then for 5 minutes) fail in turn: 0 lost, "
             "0 differing duplicates, 0 dead-lettered, recovery times; then a broker restart: 0 of the waiting "
             "requests lost; then hostile input (a slow-to-parse body, messages under another job's attribute).",
}
CHAOS: Final = "chaos"


def _register_drill(name: str, help_text: str) -> None:
    def command(timeout: DrillTimeoutOption = DEFAULT_DRILL_TIMEOUT_S, local_dir: LocalDirOption = None,
                as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False) -> None:
        _run_drills([name], timeout, local_dir, as_json)

    drill_app.command(name, help=help_text)(handled(command))


for _name, _help in DRILL_HELP.items():
    if _name != CHAOS:
        _register_drill(_name, _help)


@drill_app.command(CHAOS, help=DRILL_HELP[CHAOS])
@handled
def drill_chaos(timeout: DrillTimeoutOption = DEFAULT_DRILL_TIMEOUT_S, local_dir: LocalDirOption = None,
                as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
                jobs: JobsOption = DEFAULT_LOAD_JOBS, write: WriteOption = False,
                store_outage: StoreOutageOption = DEFAULT_STORE_OUTAGE_S) -> None:
    """The chaos drill, with the size of its load (docs/runbooks/chaos-drill.md)."""
    _run_drills([CHAOS], timeout, local_dir, as_json, jobs, write, store_outage)


@drill_app.command("all")
@handled
def drill_all(timeout: DrillTimeoutOption = DEFAULT_DRILL_TIMEOUT_S, local_dir: LocalDirOption = None,
              as_json: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
              jobs: JobsOption = DEFAULT_LOAD_JOBS, write: WriteOption = False,
              store_outage: StoreOutageOption = DEFAULT_STORE_OUTAGE_S,
              skip: Annotated[list[str] | None, typer.Option(
                  "--skip", help="Leave out this drill (repeatable), e.g. one you just ran on its own.")] = None,
              ) -> None:
    """Run every drill in turn (chaos last: it restarts the broker); exit 1 if any fails."""
    unknown = sorted(set(skip or ()) - DRILL_HELP.keys())
    if unknown:
        raise typer.BadParameter(f"no drill called {', '.join(unknown)}; the drills are {', '.join(DRILL_HELP)}",
                                 param_hint="--skip")
    _run_drills([name for name in DRILL_HELP if name not in (skip or ())], timeout, local_dir, as_json, jobs, write,
                store_outage)
