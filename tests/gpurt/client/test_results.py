"""Artifacts read back as data without knowing the store's layout; results that did not succeed read well."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpurt.client import ClientError, Result, to_frame
from kernels.params import EuropeanOptionParams, OptionKind
from kernels.risk import QUANTILE_GRID, summarise
from runtime.protocol.messages import ErrorKind, JobError, JobResult, JobStatus, JobType
from runtime.scheduler.store import ResultStore

SCENARIOS = 20_000


@pytest.fixture
def var_result(tmp_path: Path) -> tuple[Result, np.ndarray]:
    """A VaR result whose artifacts the scheduler's store wrote, from a loss sample we know."""
    losses = np.random.default_rng(7).standard_t(df=4, size=SCENARIOS) * 1e4
    summary = summarise(losses, confidence=0.99)
    store = ResultStore(tmp_path.as_uri())
    urls = store.put_artifacts("var-1", summary.artifacts)
    raw = JobResult(job_id="var-1", status=JobStatus.SUCCEEDED, type=JobType.PORTFOLIO_VAR,
                    result={"estimate": summary.var.estimate}, artifacts=urls)
    return Result(raw), losses


def test_loss_quantiles_are_the_samples_quantiles(var_result: tuple[Result, np.ndarray]) -> None:
    result, losses = var_result
    grid = np.linspace(0.0, 1.0, QUANTILE_GRID)
    np.testing.assert_allclose(result.loss_quantiles(), np.quantile(losses, grid, method="inverted_cdf"))


def test_the_loss_histogram_counts_every_scenario_once(var_result: tuple[Result, np.ndarray]) -> None:
    result, losses = var_result
    histogram = result.loss_histogram()
    assert int(histogram["count"].sum()) == SCENARIOS
    assert histogram["bin_low"].iloc[0] == pytest.approx(losses.min())
    assert histogram["bin_high"].iloc[-1] == pytest.approx(losses.max())
    assert (histogram["bin_high"] > histogram["bin_low"]).all()


def test_an_array_artifact_goes_to_parquet_and_back(var_result: tuple[Result, np.ndarray], tmp_path: Path) -> None:
    import pyarrow.parquet as pq  # 0.3 s to import: only where a test writes Parquet

    result, _ = var_result
    pq.write_table(result.artifact_table("loss_quantiles.npy"), tmp_path / "q.parquet")
    back = pq.read_table(tmp_path / "q.parquet").column("loss_quantiles").to_numpy()
    np.testing.assert_array_equal(back, result.loss_quantiles())


def test_an_unknown_artifact_names_the_job_and_what_it_has(var_result: tuple[Result, np.ndarray]) -> None:
    result, _ = var_result
    with pytest.raises(KeyError, match=r"var-1 has no artifact 'losses.npy'; it has \['loss_histogram.json'"):
        result.artifact("losses.npy")


def test_a_failed_result_reads_as_its_error_in_repr_and_table() -> None:
    raw = JobResult(job_id="bad-1", status=JobStatus.FAILED, type=JobType.NOOP,
                    error=JobError(kind=ErrorKind.PERMANENT, message="simulated permanent failure"))
    result = Result(raw)
    assert repr(result) == "Result('bad-1', failed, permanent: 'simulated permanent failure')"
    assert "simulated permanent failure" in result._repr_html_()
    frame = to_frame([result])
    assert frame.loc[0, "error"] == "simulated permanent failure" and frame.loc[0, "status"] == "failed"


def test_a_baskets_per_asset_greeks_get_one_name_each() -> None:
    def greek(value: float) -> dict[str, object]:
        return {"estimate": value, "std_error": 0.01, "ci_low": value - 0.03, "ci_high": value + 0.03,
                "method": "finite difference"}

    raw = JobResult(job_id="basket-1", status=JobStatus.SUCCEEDED, type=JobType.BASKET_OPTION,
                    result={"estimate": 5.0, "greeks": {"delta": [greek(0.3), greek(0.4)], "rho": greek(20.0)}})
    result = Result(raw)
    assert list(result.greeks) == ["delta_0", "delta_1", "rho"]
    assert list(result.greeks_frame()["estimate"]) == [0.3, 0.4, 20.0]
    assert result.to_frame().loc[0, "delta_1"] == 0.4


def test_an_artifact_gone_from_the_store_names_job_and_url(var_result: tuple[Result, np.ndarray]) -> None:
    result, _ = var_result
    url = result.raw.artifacts["loss_quantiles.npy"]
    Path(url.removeprefix("file://")).unlink()
    with pytest.raises(ClientError, match=r"cannot read artifact loss_quantiles.npy of job var-1 at .*"):
        result.loss_quantiles()


def test_a_results_job_is_its_types_validated_params_and_params_stays_the_echo() -> None:
    echo = {"strike": 90, "kind": "put", "paths": 1_000}
    result = Result(JobResult(job_id="put", status=JobStatus.SUCCEEDED, type=JobType.EUROPEAN_OPTION,
                              result={"estimate": 1.0, "params": echo}))
    assert isinstance(result.job, EuropeanOptionParams)
    assert (result.job.strike, result.job.kind, result.job.spot) == (90.0, OptionKind.PUT, 100.0)  # defaults filled
    assert result.params == echo  # the JSON as the kernel echoed it, for notebooks that index it
    failed = Result(JobResult(job_id="f", status=JobStatus.FAILED, type=JobType.EUROPEAN_OPTION,
                              error=JobError(kind=ErrorKind.PERMANENT, message="no")))
    assert failed.job is None


def test_a_result_whose_params_no_longer_validate_says_so() -> None:
    result = Result(JobResult(job_id="old", status=JobStatus.SUCCEEDED, type=JobType.EUROPEAN_OPTION,
                              result={"params": {"paths": 0}}))
    with pytest.raises(ClientError, match="job old's parameters are not valid european_option parameters now"):
        _ = result.job
