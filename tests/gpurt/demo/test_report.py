"""Reports: the figures are the Python API's plots of real results, written as PNGs the documents reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpurt.demo.report import ReportInput, write_report
from gpurt.demo.run import build_report
from gpurt.demo.workload import build_workload
from runtime.protocol.messages import JobError, JobResult, JobStatus, JobType
from tests.file_modes import modes_open_to_others
from tests.gpurt.client.kernel_results import convergence, var_by_horizon

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def risk_results(tmp_path_factory: pytest.TempPathFactory) -> list[JobResult]:
    """A 10-day VaR job with its stored artifacts and a call at three path counts, as the platform returns them."""
    store = tmp_path_factory.mktemp("store")
    return [r.raw for r in (*var_by_horizon(store, 20_000, horizons=(10,)), *convergence(store, (1_000, 4_000,
                                                                                              16_000)))]


def test_report_draws_the_loss_and_convergence_and_references_them(risk_results: list[JobResult],
                                                                    tmp_path: Path) -> None:
    var, *calls = risk_results
    results = [*risk_results, JobResult(job_id="bad", status=JobStatus.REJECTED,
                                        error=JobError(kind="invalid", message="a|b")),
               JobResult(job_id="ok <1>", status=JobStatus.SUCCEEDED, type="european_option",
                         result={"estimate": 10.45, "std_error": 0.01})]
    report = ReportInput(title="t", results=results, convergence_ids=[c.job_id for c in calls], var_id=var.job_id)

    files = write_report(report, tmp_path / "out")

    assert [p.name for p in files.plots.values()] == ["loss_distribution.png", "convergence.png"]
    markdown, page = files.markdown.read_text(), files.html.read_text()
    for path in files.plots.values():
        assert path.read_bytes().startswith(PNG_MAGIC) and path.stat().st_size > 5_000
        assert f"]({path.name})" in markdown
        assert f'src="{path.name}"' in page
    assert "ok &lt;1&gt;" in page and "ok <1>" not in page  # job ids are escaped in HTML
    assert "a\\|b" in markdown  # a pipe in an error does not break the Markdown table
    summary = var.result or {}
    assert f"VaR 99.0%: {summary['var']:,.2f}; CVaR 99.0%: {summary['cvar']:,.2f}" in markdown
    last = (calls[-1].result or {})
    assert f"Option at 16,000 paths: {last['estimate']:.5f}" in markdown and "Black-Scholes" in markdown


@pytest.mark.usefixtures("open_umask")
def test_the_report_is_private_to_its_user(risk_results: list[JobResult], tmp_path: Path) -> None:
    var, *calls = risk_results
    report = ReportInput(title="t", results=risk_results, convergence_ids=[c.job_id for c in calls], var_id=var.job_id)
    stale = tmp_path / "mine" / "demo-1" / "report.md"
    stale.parent.mkdir(parents=True)
    stale.write_text("an earlier report, left readable\n")

    rewritten = write_report(report, stale.parent)
    fresh = write_report(report, tmp_path / "reports" / "demo-2")  # "reports" made here too

    assert rewritten.plots and fresh.plots  # prices, VaR and their plots: all of it
    assert modes_open_to_others(stale.parent) == {}
    assert modes_open_to_others(tmp_path / "reports") == {}


def test_report_without_data_for_plots_writes_documents_only(tmp_path: Path) -> None:
    files = write_report(ReportInput(title="empty", results=[], notes=["nothing ran"]), tmp_path)
    assert files.plots == {}
    assert "nothing ran" in files.markdown.read_text()
    assert list(tmp_path.glob("*.png")) == []


def test_a_var_job_without_its_histogram_is_a_note_not_a_figure(tmp_path: Path) -> None:
    var = JobResult(job_id="var-1", status=JobStatus.SUCCEEDED, type=JobType.PORTFOLIO_VAR,
                    result={"var": 2.33, "cvar": 2.67, "var_confidence": 0.99, "horizon_trading_days": 1.0})
    files = write_report(ReportInput(title="t", results=[var], var_id="var-1"), tmp_path)
    assert files.plots == {}
    assert "loss distribution not drawn: \"job var-1 has no artifact 'loss_histogram.json'" in \
        files.markdown.read_text()


def test_the_demo_report_names_the_jobs_its_figures_draw(risk_results: list[JobResult]) -> None:
    workload = build_workload("run", quick=True)
    results = {r.job_id: JobResult(job_id=r.job_id, status=JobStatus.SUCCEEDED, type=r.type)
               for r in workload.requests[1:]}  # the probe never answered

    report = build_report(workload, results, "demo")

    assert report.var_id == workload.var_id and report.convergence_ids == list(workload.convergence_ids)
    assert [r.job_id for r in report.results] == [r.job_id for r in workload.requests[1:]]
    assert report.notes == [f"no result within the time limit for: {workload.probe_id}"]


@pytest.mark.parametrize("quick", [True, False])
def test_demo_workload_covers_every_job_type_with_unique_ids(quick: bool) -> None:
    workload = build_workload("run", quick)
    ids = [r.job_id for r in workload.requests]
    assert len(ids) == len(set(ids))
    assert {r.type.value for r in workload.requests} == {t.value for t in JobType}
    var = next(r for r in workload.requests if r.job_id == workload.var_id)
    assert len(var.params.exposures) == 10
    np.linalg.cholesky(np.asarray(var.params.correlation))  # positive definite, or the kernel cannot factor it
    assert sorted(workload.convergence_ids.values()) == list(workload.convergence_ids.values())


@pytest.mark.parametrize("quick", [True, False])
def test_a_type_no_study_covers_runs_from_its_descriptor(quick: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's job list is read from the descriptors too: a type the studies leave out (here: the risk desk's
    four, as a new type would be) runs as its example, or in a quick run as its smallest warm-up job."""
    from gpurt.demo import workload as demo_workload
    from kernels.descriptors import DESCRIPTORS

    monkeypatch.setattr(demo_workload, "_risk_desk_jobs", lambda run_id, sizes: [])
    workload = build_workload("run", quick)
    assert {r.type.value for r in workload.requests} == {t.value for t in JobType}
    for job_type in (JobType.HESTON_OPTION, JobType.OPTION_BOOK, JobType.BASKET_OPTION, JobType.AMERICAN_OPTION):
        descriptor = DESCRIPTORS[job_type]
        (request,) = [r for r in workload.requests if r.type is job_type]
        params = descriptor.warm[0].params if quick else descriptor.example
        assert request.job_id == f"run-{job_type.value}"
        assert request.params == descriptor.params.model_validate(params)
