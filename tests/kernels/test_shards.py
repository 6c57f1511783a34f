"""Sharded jobs: any number of shards gives the figures of the job run as one task."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest

from kernels.context import RunContext
from kernels.jobs import JobOutput
from kernels.params import PortfolioVarParams
from kernels.portfolio_var import _Model, simulate_losses
from kernels.shards import merge, run_shard, shard_count
from tests.kernels.job_input import run_raw, typed

# 300,000 paths = 10 antithetic blocks; 50,000 VaR scenarios = 13 blocks; 40,000 Asian paths = several blocks.
JOBS: dict[str, dict[str, Any]] = {
    "european_option": {"paths": 300_000, "seed": 11},
    "asian_option": {"paths": 40_000, "steps": 12, "seed": 5},
    "portfolio_var": {"paths": 50_000, "exposures": [1e6, -4e5, 2.5e5], "volatilities": [0.2, 0.3, 0.25],
                      "correlation": [[1, 0.3, 0.1], [0.3, 1, 0.2], [0.1, 0.2, 1]], "confidence": 0.99,
                      "revaluation": "full", "seed": 3},
}
SHARD_COUNTS = (1, 3, 7)
# The sums are added shard by shard instead of chunk by chunk: the same terms, a different float64 rounding.
MERGE_RTOL = 1e-12


def _sharded(job: str, shards: int, params: dict[str, Any] | None = None) -> JobOutput:
    kind, p = typed(job, params or JOBS[job])
    outputs = [run_shard(kind, p, i, shards, device="cpu") for i in range(shards)]
    random.Random(shards).shuffle(outputs)  # the merge puts them back in block order itself
    return merge(kind, p, outputs, elapsed_s=1.0)


@pytest.mark.parametrize("job", ["european_option", "asian_option"])
def test_option_estimates_do_not_depend_on_the_shard_count(job: str) -> None:
    whole = run_raw(job, JOBS[job], device="cpu").summary
    for shards in SHARD_COUNTS:
        out = _sharded(job, shards)
        assert out.summary["shards"] == shards and out.paths == whole["paths"]
        for key in ("estimate", "std_error", "ci_low", "ci_high", "control_beta"):
            assert out.summary[key] == pytest.approx(whole[key], rel=MERGE_RTOL), (shards, key)


def test_more_shards_than_blocks_leaves_some_empty_and_changes_nothing() -> None:
    params = {"paths": 70_000, "seed": 2}  # 3 blocks
    whole = run_raw("european_option", params, device="cpu").summary
    out = _sharded("european_option", 5, params)
    assert out.summary["estimate"] == pytest.approx(whole["estimate"], rel=MERGE_RTOL)
    assert out.summary["std_error"] == pytest.approx(whole["std_error"], rel=MERGE_RTOL)


def test_var_and_cvar_are_exact_under_sharding_and_the_histogram_merges() -> None:
    job = "portfolio_var"
    whole = run_raw(job, JOBS[job], device="cpu")
    exact = ("var", "var_ci", "var_std_error", "cvar", "cvar_ci", "cvar_std_error")
    histograms = []
    for shards in SHARD_COUNTS:
        out = _sharded(job, shards)
        for key in exact:
            assert out.summary[key] == whole.summary[key], (shards, key)  # bit for bit: the same order statistics
        loss_sd = whole.summary["delta_normal_var"] / 2.33
        assert out.summary["mean_loss"] == pytest.approx(whole.summary["mean_loss"], abs=1e-12 * loss_sd)
        histograms.append(json.loads(out.artifacts["loss_histogram.json"]))
    reference = json.loads(whole.artifacts["loss_histogram.json"])
    for histogram in histograms:
        assert histogram["counts"] == histograms[0]["counts"] and histogram["bin_edges"] == histograms[0]["bin_edges"]
        assert sum(histogram["counts"]) == JOBS[job]["paths"]
        # the tail's quantiles are the job's exact ones; the median is not in any shard's tail, so it is left out
        assert histogram["quantiles"] == {q: v for q, v in reference["quantiles"].items() if float(q) >= 0.99}
    # the merged counts are every loss of the job counted on the fixed edges
    params = PortfolioVarParams.model_validate(JOBS[job])
    losses = simulate_losses(params, _Model(params), "cpu", RunContext(lambda: False, lambda _: None))
    edges = np.array(histograms[0]["bin_edges"])
    assert histograms[0]["counts"] == np.histogram(np.clip(losses, edges[0], edges[-1]), bins=edges)[0].tolist()


def test_only_large_mergeable_jobs_are_split() -> None:
    assert shard_count(*typed("european_option", {"paths": 1_000_000}), 300_000) == 4
    assert shard_count(*typed("european_option", {"paths": 1_000_000}), None) == 1
    assert shard_count(*typed("european_option", {"paths": 100_000}), 300_000) == 1
    assert shard_count(*typed("european_option", {"paths": 1_000_000, "greeks": ["delta"]}), 300_000) == 1
    american = {"spots": [100.0], "weights": [1.0], "volatilities": [0.2], "paths": 1_000_000}
    assert shard_count(*typed("american_option", american), 300_000) == 1
    assert shard_count(*typed("portfolio_var", JOBS["portfolio_var"]), 10_000) == 5


def test_a_merge_missing_a_shard_is_refused() -> None:
    kind, params = typed("european_option", JOBS["european_option"])
    outputs = [run_shard(kind, params, i, 3, device="cpu") for i in (0, 2)]
    with pytest.raises(ValueError, match="not all"):
        merge(kind, params, outputs, elapsed_s=1.0)


@pytest.mark.parametrize("job", sorted(JOBS))
def test_a_shard_run_again_with_smaller_chunks_gives_the_same_part(job: str) -> None:
    # 2**-20 of any kernel's usual chunk is one block: every block its own launch
    kind, params = typed(job, JOBS[job])
    usual = run_shard(kind, params, 1, 3, device="cpu")
    smallest = run_shard(kind, params, 1, 3, device="cpu", chunk_scale=2.0**-20)
    assert smallest.blocks == usual.blocks > 1
    if isinstance(usual.part, np.ndarray):
        assert smallest.part.tobytes() == usual.part.tobytes()
    else:  # VaR's largest losses
        assert vars(smallest.part).keys() == vars(usual.part).keys()
        for name, value in vars(usual.part).items():
            assert np.array_equal(getattr(smallest.part, name), value), name
