"""Tables a person reads: job results (``gpurt submit``, ``gpurt jobs get``, the demo), a session's jobs,
validation reports, drill figures."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.table import Table

from gpurt.bench.chaos import shown
from gpurt.demo.report.summary import headline, number
from runtime.access.control_api import JobState
from runtime.protocol.messages import JobResult, JobStatus
from validation.drills.base import DrillResult
from validation.report import Report, Status, Verdict

STATUS_STYLE = {
    JobStatus.SUCCEEDED: "green",
    JobStatus.FAILED: "red",
    JobStatus.REJECTED: "red",
    JobStatus.CANCELLED: "yellow",
}


def _status(result: JobResult) -> str:
    return f"[{STATUS_STYLE.get(result.status, 'white')}]{result.status}[/]"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _short(job_id: str, run_id: str) -> str:
    if not run_id:
        return job_id
    return job_id.removeprefix(f"{run_id}-").removesuffix(f"-{run_id}")


def results_table(results: Iterable[JobResult], title: str = "results", strip: str = "") -> Table:
    """A table with one row per result (the demo's batch); ``strip`` (a run id) is left out of job ids."""
    table = Table(title=title)
    table.add_column("job", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("try", justify="right")
    table.add_column("run s", justify="right")
    table.add_column("result", overflow="fold")
    for result in results:
        table.add_row(_short(result.job_id, strip), _status(result), str(result.attempt),
                      _seconds(result.metrics.run_s), headline(result))
    return table


def session_table(session: str, jobs: Iterable[JobState]) -> Table:
    """A session's jobs (``gpurt jobs list --session``): state, type and, once finished, the headline figure."""
    jobs = list(jobs)
    table = Table(title=f"session {session}: {len(jobs)} jobs")
    for column in ("job", "state", "type", "result"):
        table.add_column(column, overflow="fold")
    for job in jobs:
        result = job.result
        table.add_row(job.job_id, job.state or "unknown", result.type.value if result and result.type else "",
                      headline(result) if result else "")
    return table


def result_detail(result: JobResult) -> Table:
    """One result, field by field (``gpurt submit --wait``, ``gpurt jobs get``)."""
    table = Table(title=f"job {result.job_id}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    metrics = result.metrics
    table.add_row("type", str(result.type or "-"))
    table.add_row("status", _status(result))
    table.add_row("attempt", str(result.attempt))
    if result.cached:
        table.add_row("cached", f"from {result.cached_from} (answered from the result cache, nothing ran)")
    table.add_row("device", metrics.device or "-")
    table.add_row("queue wait s", _seconds(metrics.queue_wait_s))
    table.add_row("run s", _seconds(metrics.run_s))
    if metrics.paths_per_s:
        table.add_row("paths/s", f"{metrics.paths_per_s:.3g}")
    for key, value in (result.result or {}).items():
        table.add_row(key, number(value))
    for name, url in result.artifacts.items():
        table.add_row(f"artifact {name}", url)
    if result.error is not None:
        table.add_row("error", f"[red]{result.error.kind}[/]: {result.error.message}")
    return table


_CHECK_STYLE = {Status.PASS: "green", Status.FAIL: "bold red", Status.NO_CAPACITY: "bold yellow", Status.SKIP: "yellow"}


def print_validation(report: Report, console: Console) -> None:
    """Print the report as a table, then one line per failure naming what to fix."""
    table = Table(title=f"gpurt validate — {report.target}", show_lines=False)
    table.add_column("check", no_wrap=True)
    table.add_column("status")
    table.add_column("evidence", overflow="fold")
    table.add_column("duration", justify="right")
    for result in report.results:
        style = _CHECK_STYLE[result.status]
        table.add_row(result.name, f"[{style}]{result.status.value}[/]", result.evidence,
                      f"{result.duration_s:.2f}s")
    console.print(table)
    for result in report.failed:
        console.print(f"[bold red]✗ {result.name}[/]: {result.fix or result.evidence}")
    for result in report.short:
        console.print(f"[bold yellow]! {result.name}[/] (no capacity, not broken): {result.fix or result.evidence}")
    summary = {Verdict.OK: "[green]all checks passed[/]",
               Verdict.NO_CAPACITY: f"[bold yellow]no capacity: {len(report.short)} check(s) found a quota below "
                                    "the stack's need (the platform works; nothing to roll back)[/]",
               Verdict.BROKEN: f"[bold red]{len(report.failed)} check(s) failed[/]"}[report.verdict]
    console.print(summary)


def figures_table(result: DrillResult) -> Table:
    """A two-column table of the drill's figures."""
    table = Table(title=f"drill {result.name}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in result.figures.items():
        table.add_row(name, shown(value))
    return table
