"""Reports: plots are written, the documents reference them, artifacts are read back from a store URL."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from gpurt.demo.report import ConvergencePoint, LossDistribution, ReportInput, write_report
from gpurt.demo.report.artifacts import ArtifactError, loss_distribution
from gpurt.demo.workload import build_workload
from runtime.protocol.messages import JobError, JobResult, JobStatus, JobType

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _var_result(artifacts: dict[str, str], **summary: float) -> JobResult:
    return JobResult(job_id="var-1", status=JobStatus.SUCCEEDED, type="portfolio_var",
                     result={"var": 2.33, "cvar": 2.67, "confidence": 0.99, **summary}, artifacts=artifacts)


def _convergence(reference: float) -> list[ConvergencePoint]:
    rng = np.random.default_rng(7)
    points = []
    for paths in (1_000, 4_000, 16_000):
        se = 15.0 / np.sqrt(paths)
        estimate = reference + rng.normal(0.0, se)
        points.append(ConvergencePoint(paths=paths, estimate=estimate, ci_low=estimate - 2 * se,
                                       ci_high=estimate + 2 * se))
    return points


def test_report_writes_both_plots_and_references_them(tmp_path: Path) -> None:
    losses = np.random.default_rng(1).normal(0.0, 1.0, 50_000)
    var, cvar = float(np.quantile(losses, 0.99)), float(losses[losses >= np.quantile(losses, 0.99)].mean())
    results = [
        JobResult(job_id="ok <1>", status=JobStatus.SUCCEEDED, type="european_option",
                  result={"estimate": 10.45, "std_error": 0.01}),
        JobResult(job_id="bad", status=JobStatus.REJECTED, error=JobError(kind="invalid", message="a|b")),
    ]
    report = ReportInput(title="t", results=results, convergence=_convergence(10.45), reference_price=10.45,
                         loss=LossDistribution.from_samples(losses, var, cvar, 0.99))

    files = write_report(report, tmp_path / "out")

    assert len(files.plots) == 2
    markdown, page = files.markdown.read_text(), files.html.read_text()
    for path in files.plots.values():
        assert path.read_bytes().startswith(PNG_MAGIC) and path.stat().st_size > 5_000
        assert f"]({path.name})" in markdown
        assert f'src="{path.name}"' in page
    assert "ok &lt;1&gt;" in page and "ok <1>" not in page  # job ids are escaped in HTML
    assert "a\\|b" in markdown  # a pipe in an error does not break the Markdown table
    assert f"VaR 99.0%: {var:,.2f}" in markdown


def test_report_without_data_for_plots_writes_documents_only(tmp_path: Path) -> None:
    files = write_report(ReportInput(title="empty", results=[], notes=["nothing ran"]), tmp_path)
    assert files.plots == {}
    assert "nothing ran" in files.markdown.read_text()
    assert list(tmp_path.glob("*.png")) == []


def test_loss_histogram_rejects_inconsistent_shapes() -> None:
    with pytest.raises(ValueError, match="edges"):
        LossDistribution(edges=[0.0, 1.0], counts=[1.0, 2.0], var=0.5, cvar=0.7, confidence=0.99)


def test_loss_distribution_read_from_npy_samples(tmp_path: Path) -> None:
    samples = np.random.default_rng(2).normal(size=1_000)
    buffer = io.BytesIO()
    np.save(buffer, samples)
    (tmp_path / "losses.npy").write_bytes(buffer.getvalue())

    loss = loss_distribution(_var_result({"losses.npy": (tmp_path / "losses.npy").as_uri()}))

    assert loss is not None and sum(loss.counts) == 1_000
    assert loss.edges[0] == pytest.approx(samples.min()) and loss.edges[-1] == pytest.approx(samples.max())
    assert (loss.var, loss.cvar, loss.confidence) == (2.33, 2.67, 0.99)


def test_loss_distribution_read_from_json_histogram(tmp_path: Path) -> None:
    body = {"bin_edges": [0.0, 1.0, 2.0], "counts": [3, 4], "var": 1.5, "cvar": 1.8}
    (tmp_path / "hist.json").write_text(json.dumps(body))

    loss = loss_distribution(_var_result({"hist.json": (tmp_path / "hist.json").as_uri()}))

    assert loss is not None and loss.counts == [3.0, 4.0] and (loss.var, loss.cvar) == (1.5, 1.8)


def test_loss_distribution_absent_or_unusable(tmp_path: Path) -> None:
    assert loss_distribution(_var_result({})) is None
    np.save(tmp_path / "l.npy", np.zeros(10))
    result = JobResult(job_id="x", status=JobStatus.SUCCEEDED, result={"var": 1.0},
                       artifacts={"l.npy": (tmp_path / "l.npy").as_uri()})
    with pytest.raises(ArtifactError, match="cvar"):
        loss_distribution(result)


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
