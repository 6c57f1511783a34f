"""The report's Greeks table and Heston smile, from real (tiny) job results."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpurt.demo.report import ReportInput, write_report
from gpurt.demo.report.greeks import greek_rows
from gpurt.demo.workload import ALL_GREEKS, HESTON_MARKET
from runtime.protocol.messages import JobResult, JobStatus
from tests.kernels.job_input import run_raw

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
STRIKES = (80.0, 90.0, 100.0, 110.0, 120.0)


def _result(job_id: str, job_type: str, params: dict) -> JobResult:
    out = run_raw(job_type, params, device="cpu")
    return JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, type=job_type, result=out.summary)


@pytest.fixture(scope="module")
def results() -> list[JobResult]:
    book = {**HESTON_MARKET, "model": "heston", "steps_per_year": 16, "paths": 20_000, "greeks": ["delta", "vega"],
            "contracts": [{"strike": k, "maturity": 1.0} for k in STRIKES]}
    return [
        _result("heston", "heston_option", {**HESTON_MARKET, "steps": 16, "paths": 5_000, "greeks": ALL_GREEKS}),
        _result("book", "option_book", book),
        JobResult(job_id="lost", status=JobStatus.FAILED, type="european_option"),
    ]


def test_greeks_table_has_a_row_per_greek_and_contract(results: list[JobResult]) -> None:
    rows = greek_rows(results)
    assert [r.greek for r in rows if r.job_id == "heston"] == ALL_GREEKS
    assert len([r for r in rows if r.job_id == "book"]) == 2 * len(STRIKES)
    assert any(r.contract == "call K=80 T=1" for r in rows)
    assert all(r.std_error > 0 and r.method for r in rows)


def test_greeks_table_lists_a_baskets_greeks_per_asset() -> None:
    basket = {"spots": [100, 90], "weights": [1, 1], "volatilities": [0.2, 0.3], "paths": 2_000,
              "greeks": ["delta", "rho"]}
    rows = greek_rows([_result("basket", "basket_option", basket)])
    assert [r.greek for r in rows] == ["delta_0", "delta_1", "rho"]
    assert all(r.std_error > 0 and r.method for r in rows)


def test_the_heston_books_smile_is_drawn(results: list[JobResult], tmp_path: Path) -> None:
    files = write_report(ReportInput(title="risk", results=results), tmp_path)
    smile_png = tmp_path / "heston_smile.png"
    assert smile_png.read_bytes().startswith(PNG_MAGIC) and smile_png in files.plots.values()
    markdown = files.markdown.read_text()
    assert "## Greeks" in markdown and "heston_smile.png" in markdown and "5 contracts" in markdown
    assert "<h2>Greeks</h2>" in files.html.read_text()
