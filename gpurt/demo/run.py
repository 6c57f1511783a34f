"""``make demo``: run the demo workload on a running local platform and turn its results into a report."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from gpurt.client import Client, JobFuture, wait
from gpurt.demo.report import ReportInput
from gpurt.demo.workload import Workload
from kernels.params import MAX_SLEEP_S
from runtime.access.local_monitoring import MonitoringInfo
from runtime.access.transport import WAIT_TICK_S
from runtime.local.platform import LocalPlatform
from runtime.protocol.messages import JobRequest, JobResult


def run_workload(platform: LocalPlatform, workload: Workload, timeout_s: float,
                 on_result: Callable[[JobResult], None] | None = None,
                 on_tick: Callable[[], None] | None = None) -> dict[str, JobResult]:
    """Publish every request of ``workload`` and collect results until all arrived or ``timeout_s`` passed."""
    return run_requests(platform, workload.requests, timeout_s, on_result, on_tick)


def run_requests(platform: LocalPlatform, requests: list[JobRequest], timeout_s: float,
                 on_result: Callable[[JobResult], None] | None = None,
                 on_tick: Callable[[], None] | None = None) -> dict[str, JobResult]:
    """Submit ``requests`` through the Python API's ``Client`` and collect their results until all arrived or
    ``timeout_s`` passed; ``on_result`` sees each as it arrives, ``on_tick`` runs while none does."""
    # Named in full, so the demo talks to its own platform whatever the environment names.
    with Client(target=platform.target()) as client:
        return _collect(client.map(requests), time.monotonic() + timeout_s, on_result, on_tick)


def _collect(futures: list[JobFuture], deadline: float, on_result: Callable[[JobResult], None] | None = None,
             on_tick: Callable[[], None] | None = None) -> dict[str, JobResult]:
    """The results of ``futures`` as they arrive, until all have or ``deadline`` (monotonic) passed."""
    results: dict[str, JobResult] = {}
    pending = set(futures)
    while pending and (remaining := deadline - time.monotonic()) > 0:
        done, pending = wait(pending, timeout=min(WAIT_TICK_S, remaining), return_when="FIRST_COMPLETED")
        for future in done:
            result = results[future.job_id] = future.outcome().raw
            if on_result is not None:
                on_result(result)
        if not done and on_tick is not None:
            on_tick()
    return results


# The demo's overflow budget: short, so a full local pool spills within the demo's minute.
DEMO_SPILL_AFTER_S: Final = 5.0
# Each filler job holds its worker this many budgets, so the jobs queued behind them surely wait past it.
_FILL_BUDGETS: Final = 3


def overflow_requests(run_id: str, workers: int, spill_after_s: float) -> list[JobRequest]:
    """Fill the local pool: one job per worker holds it (the first ``workers``), and one more per worker waits
    behind, past the budget ``spill_after_s``, then overflows to the Vertex AI stand-in (docs/scheduler.md,
    "Overflow to Vertex AI"). ``run_overflow`` submits them so that the holders are the ones that start."""
    hold_s = min(_FILL_BUDGETS * spill_after_s, MAX_SLEEP_S)
    return [JobRequest.model_validate({"job_id": f"{run_id}-fill-{index}", "type": "noop",
                                       "params": {"sleep_s": hold_s if index < workers else 1.0}})
            for index in range(2 * workers)]


def run_overflow(platform: LocalPlatform, requests: list[JobRequest], workers: int,
                 timeout_s: float) -> dict[str, JobResult]:
    """Run ``overflow_requests``: the holders first, the waiters once the platform runs every holder.

    Published together, a replica's slot may take a waiter ahead of a holder (each slot submits the next job
    ahead of the one it runs), and a free worker then runs the short waiter first: nothing waits past the budget,
    nothing overflows. A holder the platform runs is on its way to a worker of its own, the workers being idle.
    """
    holders, waiters = requests[:workers], requests[workers:]
    deadline = time.monotonic() + timeout_s
    with Client(target=platform.target()) as client:
        futures = client.map(holders)
        while any(client.state(r.job_id) is None for r in holders) and time.monotonic() < deadline:
            time.sleep(WAIT_TICK_S)
        return _collect([*futures, *client.map(waiters)], deadline)


def build_report(workload: Workload, results: dict[str, JobResult], title: str,
                 validation: list[dict[str, str]] | None = None) -> ReportInput:
    """The report of one demo run: every result, in the workload's order, with the jobs its figures draw."""
    notes: list[str] = []
    missing = [r.job_id for r in workload.requests if r.job_id not in results]
    if missing:
        notes.append(f"no result within the time limit for: {', '.join(missing)}")
    ordered = [results[r.job_id] for r in workload.requests if r.job_id in results]
    return ReportInput(title=title, results=ordered, convergence_ids=list(workload.convergence_ids),
                       var_id=workload.var_id, notes=notes, validation=validation)


def monitoring_unavailable() -> str | None:
    """Why the demo cannot run Prometheus and Alertmanager here, or None when it can."""
    from runtime.local.prometheus.stack import MonitoringUnavailable, find_binaries

    try:
        find_binaries()
    except MonitoringUnavailable as exc:
        return str(exc)
    return None


def with_live_series(report: ReportInput, monitoring: MonitoringInfo | None, start: float, end: float) -> ReportInput:
    """``report`` with the platform's Prometheus panels over the run (unix times), or a note saying why not."""
    from runtime.access.prometheus_api import PrometheusError
    from runtime.local.prometheus.run_series import collect_run_series

    if monitoring is None:
        note = "no live plots: the platform ran without monitoring (`gpurt local up --monitoring`)"
        return report.model_copy(update={"notes": [*report.notes, note]})
    try:
        live = collect_run_series(monitoring.prometheus_url, start, end)
    except PrometheusError as exc:
        return report.model_copy(update={"notes": [*report.notes, f"no live plots: {exc}"]})
    note = f"live plots read from Prometheus ({monitoring.prometheus_url}/graph); queries: " + "; ".join(
        f"{panel.title}: `{panel.query}`" for panel in live.panels)
    return report.model_copy(update={"live": live, "notes": [*report.notes, note]})

