"""Same seed, same answer: independent of chunking, thread count and repetition; kernels cancel and report."""

from __future__ import annotations

import dataclasses

import numba
import pytest

from kernels import asian, european, portfolio_var, random_walk, risk
from kernels.errors import JobCancelled
from tests.kernels.job_input import run_raw

JOBS = {
    "european_option": {"paths": 300_001, "seed": 4},
    "asian_option": {"paths": 20_001, "steps": 12, "seed": 4},
    "random_walk": {"paths": 3_001, "steps": 20, "seed": 4},
    "portfolio_var": {"exposures": [1.0, -2.0, 3.0], "volatilities": [0.1, 0.2, 0.3], "paths": 50_001,
                      "revaluation": "full", "seed": 4},
}


TIMINGS = ("elapsed_s", "load_s", "kernel_s", "paths_per_s")


def _numbers(job: str, params: dict) -> dict:
    out = run_raw(job, params, device="cpu")
    return {k: v for k, v in out.summary.items() if k not in TIMINGS}


@pytest.mark.parametrize("job", list(JOBS))
def test_repeatable_and_seed_sensitive(job: str) -> None:
    first = _numbers(job, JOBS[job])
    assert _numbers(job, JOBS[job]) == first
    assert _numbers(job, {**JOBS[job], "seed": 5})["estimate"] != first["estimate"]


def test_results_do_not_depend_on_chunk_size_or_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    reference = {job: _numbers(job, params) for job, params in JOBS.items()}
    monkeypatch.setattr(european, "KERNEL", dataclasses.replace(european.KERNEL, cpu_chunk_blocks=1))
    monkeypatch.setattr(asian, "CPU_CHUNK_PATH_STEPS", asian.PATHS_PER_BLOCK * 12)  # one block per chunk
    monkeypatch.setattr(random_walk, "CPU_CHUNK_PATH_STEPS", random_walk.PATHS_PER_BLOCK * 20 * 3)
    monkeypatch.setattr(portfolio_var, "CPU_CHUNK_DRAWS", portfolio_var.SCENARIOS_PER_BLOCK * 3)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        rechunked = {job: _numbers(job, params) for job, params in JOBS.items()}
    finally:
        numba.set_num_threads(threads)
    assert rechunked == reference


def test_a_portfolio_var_artifact_is_the_loss_distribution() -> None:
    import io
    import json

    import numpy as np

    out = run_raw("portfolio_var", JOBS["portfolio_var"], device="cpu")
    histogram = json.loads(out.artifacts["loss_histogram.json"])
    quantiles = np.load(io.BytesIO(out.artifacts["loss_quantiles.npy"]))
    assert sum(histogram["counts"]) == out.paths == histogram["scenarios"]
    assert quantiles.shape == (risk.QUANTILE_GRID,) and np.all(np.diff(quantiles) >= 0)
    assert quantiles[990] == out.summary["var"]  # the artifact uses the VaR's order-statistic convention


@pytest.mark.parametrize("job", ["european_option", "asian_option", "random_walk", "portfolio_var"])
def test_kernels_cancel_between_chunks_and_report_progress(job: str) -> None:
    params = {**JOBS[job], "paths": 20_000_000 if job == "european_option" else 4_000_000}
    if job in ("asian_option", "random_walk"):
        params = {**params, "paths": 200_000, "steps": 200}
    seen: list[float] = []
    with pytest.raises(JobCancelled):
        run_raw(job, params, device="cpu", should_stop=lambda: len(seen) >= 2, progress=seen.append)
    assert 0.0 < seen[-1] < 1.0

    finished: list[float] = []
    run_raw(job, JOBS[job], device="cpu", progress=finished.append)
    assert finished == sorted(finished) and finished[-1] == 1.0
