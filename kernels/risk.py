"""VaR, CVaR and the loss-distribution artifacts from a sample of losses (host side, any device).

Everything is read off one sorted copy of the losses: the VaR order statistic and its distribution-free
interval, the tail for CVaR, the histogram and the quantile function.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from typing import Final

import numpy as np

from kernels import estimators

HISTOGRAM_BINS: Final = 200
QUANTILE_GRID: Final = 1001  # the loss_quantiles.npy artifact: quantiles at 0, 0.001, ..., 1
REPORTED_QUANTILES: Final = (0.5, 0.9, 0.95, 0.99, 0.995, 0.999)


@dataclass(frozen=True)
class LossSummary:
    """VaR and CVaR estimates, the mean loss, and the artifacts describing the distribution."""

    var: estimators.Estimate
    cvar: estimators.Estimate
    mean_loss: float
    artifacts: dict[str, bytes]


def order_statistic_index(n: int, level: float) -> int:
    """Index of the ``ceil(n p)``-th smallest of ``n`` values: the VaR convention (no interpolation)."""
    return min(n - 1, max(0, math.ceil(n * level) - 1))


def quantiles(ordered: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Quantiles of a sorted sample at ``levels`` by the VaR's own convention, the ``ceil(n p)``-th order
    statistic (NumPy's ``inverted_cdf`` method), so an artifact's 99% quantile is the reported 99% VaR."""
    n = ordered.size
    index = np.clip(np.ceil(n * np.asarray(levels, dtype=np.float64)).astype(np.int64) - 1, 0, n - 1)
    return ordered[index]


def risk_measures(
    ordered: np.ndarray, confidence: float, interval_confidence: float = estimators.CONFIDENCE
) -> tuple[estimators.Estimate, estimators.Estimate]:
    """VaR with its order-statistic interval, and CVaR with its asymptotic standard error.

    VaR is the ``ceil(n p)``-th smallest loss; the interval (at ``interval_confidence``) spans the order
    statistics at ``n p -/+ z sqrt(n p (1-p))``. CVaR = VaR + E[(L - VaR)+] / (1 - p), whose standard
    error is sd((L - VaR)+) / (sqrt(n) (1 - p)).
    """
    n = ordered.size
    z = estimators.z_score(interval_confidence)
    spread = z * math.sqrt(n * confidence * (1.0 - confidence))
    k = order_statistic_index(n, confidence)
    lo, hi = max(0, math.floor(k - spread)), min(n - 1, math.ceil(k + spread))
    var = float(ordered[k])
    var_estimate = estimators.Estimate(var, float(ordered[hi] - ordered[lo]) / (2.0 * z), float(ordered[lo]),
                                       float(ordered[hi]), interval_confidence, n)
    excess = ordered[k:] - var  # every loss below the VaR has zero excess
    mean_excess = float(excess.sum()) / n
    var_excess = max((float(np.dot(excess, excess)) / n - mean_excess**2) * n / (n - 1), 0.0)
    tail = 1.0 - confidence
    cvar_estimate = estimators.interval(var + mean_excess / tail, math.sqrt(var_excess) / (math.sqrt(n) * tail), n,
                                        interval_confidence)
    return var_estimate, cvar_estimate


def summarise(losses: np.ndarray, confidence: float, interval_confidence: float = estimators.CONFIDENCE) -> LossSummary:
    """Risk measures and artifacts (``loss_histogram.json``, ``loss_quantiles.npy``) of ``losses``."""
    ordered = np.sort(losses)
    var, cvar = risk_measures(ordered, confidence, interval_confidence)
    counts, edges = np.histogram(ordered, bins=HISTOGRAM_BINS)
    histogram = {
        "confidence": confidence, "var": var.estimate, "cvar": cvar.estimate, "scenarios": int(ordered.size),
        "bin_edges": edges.tolist(), "counts": counts.tolist(),
        "quantiles": dict(zip(map(str, REPORTED_QUANTILES),
                              quantiles(ordered, np.array(REPORTED_QUANTILES)).tolist(), strict=True)),
    }
    buffer = io.BytesIO()
    np.save(buffer, quantiles(ordered, np.linspace(0.0, 1.0, QUANTILE_GRID)))
    artifacts = {"loss_histogram.json": json.dumps(histogram).encode(), "loss_quantiles.npy": buffer.getvalue()}
    return LossSummary(var, cvar, float(ordered.mean()), artifacts)
