"""VaR/CVaR read off a sorted sample, against direct NumPy computations."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from kernels.risk import QUANTILE_GRID, quantiles, risk_measures, summarise

LOSSES = np.random.default_rng(1).standard_t(df=5, size=20_001) * 1e4


def test_quantiles_are_order_statistics_like_the_var() -> None:
    levels = np.linspace(0.0, 1.0, 77)
    assert np.array_equal(quantiles(np.sort(LOSSES), levels), np.quantile(LOSSES, levels, method="inverted_cdf"))
    var, _ = risk_measures(np.sort(LOSSES), 0.99)
    assert quantiles(np.sort(LOSSES), np.array([0.99]))[0] == var.estimate


@pytest.mark.parametrize("confidence", [0.95, 0.99])
def test_var_and_cvar_match_their_definitions(confidence: float) -> None:
    var, cvar = risk_measures(np.sort(LOSSES), confidence)
    k = int(np.ceil(LOSSES.size * confidence)) - 1
    assert var.estimate == np.sort(LOSSES)[k]
    assert var.ci_low < var.estimate < var.ci_high
    excess = np.maximum(LOSSES - var.estimate, 0.0)
    assert cvar.estimate == pytest.approx(var.estimate + excess.mean() / (1 - confidence))
    assert cvar.std_error == pytest.approx(excess.std(ddof=1) / np.sqrt(LOSSES.size) / (1 - confidence))


def test_summary_artifacts_describe_the_same_distribution() -> None:
    summary = summarise(LOSSES, 0.99)
    histogram = json.loads(summary.artifacts["loss_histogram.json"])
    grid = np.load(io.BytesIO(summary.artifacts["loss_quantiles.npy"]))
    assert sum(histogram["counts"]) == LOSSES.size and len(grid) == QUANTILE_GRID
    assert histogram["quantiles"]["0.99"] == histogram["var"] == summary.var.estimate
    assert grid[990] == summary.var.estimate
    assert summary.mean_loss == pytest.approx(LOSSES.mean())
