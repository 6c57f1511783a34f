"""Tables for job results, shared by ``gpurt submit``, ``gpurt jobs get`` and the demo."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table

from runtime.protocol import JobResult, JobStatus

STATUS_STYLE = {
    JobStatus.SUCCEEDED: "green",
    JobStatus.FAILED: "red",
    JobStatus.REJECTED: "red",
    JobStatus.CANCELLED: "yellow",
}
# Summary fields worth a column, in the order a risk user reads them.
HEADLINE_FIELDS = ("estimate", "std_error", "var", "cvar", "ci_low", "ci_high", "paths")


def headline(result: JobResult) -> str:
    """The one-line gist of a result: its main figures, or its error."""
    if result.error is not None:
        return f"{result.error.kind}: {result.error.message}"
    summary = result.result or {}
    parts = [f"{key}={_number(summary[key])}" for key in HEADLINE_FIELDS if key in summary]
    return ", ".join(parts) or "-"


def results_table(results: Iterable[JobResult], title: str = "results") -> Table:
    """A table with one row per result."""
    table = Table(title=title)
    for column in ("job", "type", "status", "attempt", "run s", "queue s", "device", "result"):
        table.add_column(column, overflow="fold")
    for result in results:
        style = STATUS_STYLE.get(result.status, "white")
        metrics = result.metrics
        table.add_row(
            result.job_id, str(result.type or "-"), f"[{style}]{result.status}[/]", str(result.attempt),
            _number(metrics.run_s), _number(metrics.queue_wait_s), metrics.device or "-", headline(result),
        )
    return table


def _number(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
