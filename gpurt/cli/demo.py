"""``gpurt demo`` (what ``make demo`` runs): the whole platform on this machine, end to end."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from gpurt.cli.common import EXIT_FAILED, console, err_console, friendly_errors

if TYPE_CHECKING:
    from runtime.local import LocalPlatform


@friendly_errors
def demo(
    quick: Annotated[bool, typer.Option("--quick", help="Small jobs (CI): the same flow in well under a minute "
                                        "of compute.")] = False,
    workers: Annotated[int | None, typer.Option(
        min=1, help="Dask workers if the demo starts the platform (default: one per GPU, else 2).")] = None,
    reports: Annotated[Path, typer.Option(help="Folder that receives demo-<timestamp>/.")] = Path("reports"),
    validate: Annotated[bool, typer.Option(help="Run `gpurt validate --local` on the platform.")] = True,
    timeout: Annotated[float, typer.Option(min=10, help="Seconds to wait for all results.")] = 900.0,
) -> None:
    """Start the local platform, run the probe and a batch of risk jobs, report, validate, shut down."""
    from gpurt.cli.render import results_table
    from gpurt.demo.report import write_report
    from gpurt.demo.run import (
        DEMO_SPILL_AFTER_S,
        build_report,
        monitoring_unavailable,
        run_workload,
        with_live_series,
    )
    from gpurt.demo.workload import build_workload
    from runtime.local import LocalConfig, LocalPlatform

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    # Free ports: the demo must not fail because something else listens on 8080/8085.
    no_monitoring = monitoring_unavailable()
    if no_monitoring:
        console.print(f"[yellow]monitoring off[/] ({no_monitoring})")
    platform = LocalPlatform(config=LocalConfig(workers=workers, port=0, emulator_port=0,
                                                monitoring=no_monitoring is None, spill_after_s=DEMO_SPILL_AFTER_S))
    with console.status("starting the local platform…") as spinner:
        started = platform.up(on_step=lambda step: spinner.update(step + "…"))
    owned = not started.already_running  # a platform the user started stays up after the demo
    try:
        console.print(f"local platform {'reused' if not owned else 'up'} at {started.state.api_url}")
        if started.state.monitoring is not None:
            console.print(f"Prometheus UI: {started.state.monitoring.prometheus_url}/alerts")
        passed, rows = True, None
        if validate:
            with console.status("validating the local platform (gpurt validate --local)…"):
                passed, rows = _validate(platform.directory)
            console.print(f"validation: {'[green]passed[/]' if passed else '[red]failed[/]'}")
        run_id = f"demo-{uuid.uuid4().hex[:6]}"
        workload = build_workload(run_id, quick)
        run_start = time.time()
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console) as progress:
            task = progress.add_task("running risk jobs", total=len(workload.requests))
            results = run_workload(
                platform, workload, timeout,
                on_result=lambda r: progress.update(task, advance=1, description=f"{r.job_id}: {r.status}"),
                on_tick=lambda: progress.refresh())
        shown = [results[r.job_id] for r in workload.requests if r.job_id in results]
        console.print(results_table(shown, title=f"demo results (run {run_id})", strip=run_id))
        report = with_live_series(build_report(workload, results, f"GPU Runtime demo {stamp}", rows),
                                  started.state.monitoring, run_start, time.time())
        files = write_report(report, reports / f"demo-{stamp}")
        console.print(f"report: {files.markdown} and {files.html} ({len(files.plots)} plot(s))")
        overflow_ok = _show_overflow(platform, run_id, timeout)
    finally:
        if owned:
            with console.status("shutting the local platform down…"):
                platform.down()
    failed = [r.job_id for r in workload.requests if r.job_id not in results
              or results[r.job_id].status != "succeeded"]
    if failed or not passed or not overflow_ok:
        problems = ", ".join(failed) or ("validation failed" if not passed else "no job overflowed to Vertex AI")
        err_console.print(f"[red]demo finished with problems[/]: {problems}")
        raise typer.Exit(EXIT_FAILED)
    console.print("[green]demo finished: every job succeeded[/]")


def _show_overflow(platform: LocalPlatform, run_id: str, timeout_s: float) -> bool:
    """Fill the local pool so the jobs behind it overflow to the Vertex AI stand-in; print where each ran.
    True when at least one job spilled and every job succeeded, or when the platform (one the user started and
    the demo reuses) runs without overflow, which is then said."""
    from gpurt.demo.run import overflow_requests, run_overflow

    with platform.api() as api:
        budget = api.status().get("overflow", {}).get("spill_after_s")
        workers = sum(pool.workers for pool in api.pools())
    if budget is None:
        console.print("[yellow]overflow not shown[/] (the running platform has none: `gpurt local up "
                      "--overflow-after SECONDS`)")
        return True
    workers = max(1, workers)
    requests = overflow_requests(f"{run_id}-overflow", workers, budget)
    with console.status(f"filling the local pool ({workers} worker(s)); jobs waiting over "
                        f"{budget:g} s overflow to Vertex AI (local stand-in)…"):
        results = run_overflow(platform, requests, workers, timeout_s)
    spilled = [r for r in results.values() if r.metrics.backend == "vertex"]
    for result in sorted(results.values(), key=lambda r: r.job_id):
        where = (f"Vertex AI custom job, after waiting {result.metrics.spilled_after_s:.1f} s for a worker"
                 if result.metrics.backend == "vertex" else f"{result.metrics.backend or '?'} worker")
        console.print(f"  {result.job_id}: {result.status} on {where}")
    return bool(spilled) and len(results) == len(requests) and all(r.status == "succeeded" for r in results.values())


def _validate(directory: Path) -> tuple[bool, list[dict[str, str]]]:
    """``gpurt validate --local`` on the demo's platform: (every check passed, one row per check for the report)."""
    from runtime.local import LocalPlatform, processes
    from validation.build import local_target
    from validation.runner import run_checks
    from validation.targets import local_checks

    report = run_checks("local", local_checks(local_target(LocalPlatform(directory), processes.is_alive)))
    rows = [{"check": r.name, "status": r.status.value, "detail": r.evidence} for r in report.results]
    return report.ok, rows
