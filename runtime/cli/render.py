"""Tables for job results, shared by ``gpurt submit``, ``gpurt jobs get`` and the demo."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table

from runtime.protocol import JobResult, JobStatus
from runtime.report.summary import headline, number

STATUS_STYLE = {
    JobStatus.SUCCEEDED: "green",
    JobStatus.FAILED: "red",
    JobStatus.REJECTED: "red",
    JobStatus.CANCELLED: "yellow",
}


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
            number(metrics.run_s), number(metrics.queue_wait_s), metrics.device or "-", headline(result),
        )
    return table
