"""``make demo``: run the demo workload on a running local platform and turn its results into a report."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from kernels.params import MAX_SLEEP_S
from runtime.access.local_monitoring import MonitoringInfo
from runtime.access.transport import ResultCollector, publish_request
from runtime.local.platform import LocalPlatform
from runtime.local.report import ConvergencePoint, ReportInput
from runtime.local.report.artifacts import ArtifactError, loss_distribution
from runtime.local.workload import CONVERGENCE_OPTION, Workload
from runtime.protocol.messages import JobRequest, JobResult, JobStatus


def run_workload(platform: LocalPlatform, workload: Workload, timeout_s: float,
                 on_result: Callable[[JobResult], None] | None = None,
                 on_tick: Callable[[], None] | None = None) -> dict[str, JobResult]:
    """Publish every request of ``workload`` and collect results until all arrived or ``timeout_s`` passed."""
    return run_requests(platform, workload.requests, timeout_s, on_result, on_tick)


def run_requests(platform: LocalPlatform, requests: list[JobRequest], timeout_s: float,
                 on_result: Callable[[JobResult], None] | None = None,
                 on_tick: Callable[[], None] | None = None) -> dict[str, JobResult]:
    """Publish ``requests`` and collect their results until all arrived or ``timeout_s`` passed."""
    clients = platform.pubsub()
    try:
        with ResultCollector(clients) as collector:
            for request in requests:
                publish_request(clients, request)
            return collector.wait([r.job_id for r in requests], timeout_s, on_result=on_result, on_tick=on_tick)
    finally:
        clients.close()


# The demo's overflow budget: short, so a full local pool spills within the demo's minute.
DEMO_SPILL_AFTER_S: Final = 5.0
# Each filler job holds its worker this many budgets, so the jobs queued behind them surely wait past it.
_FILL_BUDGETS: Final = 3


def overflow_requests(run_id: str, workers: int, spill_after_s: float) -> list[JobRequest]:
    """Fill the local pool: one job per worker holds it, and one more per worker waits behind, past the budget
    ``spill_after_s``, then overflows to the Vertex AI stand-in (docs/scheduler.md, "Overflow to Vertex AI")."""
    hold_s = min(_FILL_BUDGETS * spill_after_s, MAX_SLEEP_S)
    return [JobRequest.model_validate({"job_id": f"{run_id}-fill-{index}", "type": "noop",
                                       "params": {"sleep_s": hold_s if index < workers else 1.0}})
            for index in range(2 * workers)]


def build_report(workload: Workload, results: dict[str, JobResult], title: str,
                 validation: list[dict[str, str]] | None = None) -> ReportInput:
    """The report of one demo run: every result, the convergence series and the loss distribution."""
    from kernels.closed_form import black_scholes

    notes: list[str] = []
    missing = [r.job_id for r in workload.requests if r.job_id not in results]
    if missing:
        notes.append(f"no result within the time limit for: {', '.join(missing)}")
    points = []
    for job_id, paths in workload.convergence_ids.items():
        summary = _succeeded(results.get(job_id))
        if summary and {"estimate", "ci_low", "ci_high"} <= summary.keys():
            points.append(ConvergencePoint(paths=paths, estimate=summary["estimate"], ci_low=summary["ci_low"],
                                           ci_high=summary["ci_high"]))
    option = CONVERGENCE_OPTION
    reference = black_scholes(option["spot"], option["strike"], option["rate"], option["volatility"],
                              option["maturity"], call=option["kind"] == "call")
    loss = None
    var_result = results.get(workload.var_id)
    if var_result is not None and var_result.status is JobStatus.SUCCEEDED:
        try:
            loss = loss_distribution(var_result)
        except (ArtifactError, OSError, ValueError) as exc:
            notes.append(f"loss distribution not drawn: {exc}")
        if loss is None:
            notes.append("the portfolio VaR job stored no loss distribution artifact")
    ordered = [results[r.job_id] for r in workload.requests if r.job_id in results]
    return ReportInput(title=title, results=ordered, convergence=points, reference_price=reference, loss=loss,
                       notes=notes, validation=validation)


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
    from runtime.local.prometheus.prometheus_api import PrometheusError
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


def _succeeded(result: JobResult | None) -> dict[str, Any] | None:
    if result is None or result.status is not JobStatus.SUCCEEDED:
        return None
    return result.result
