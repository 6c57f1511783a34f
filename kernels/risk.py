"""VaR, CVaR and the loss-distribution artifacts from a sample of losses (any device).

Everything is read off one sorted copy of the losses: the VaR order statistic and its distribution-free
interval, the tail for CVaR, the histogram and the quantile function. ``summarise`` takes NumPy losses or
cupy losses still on the GPU: there the sort, the histogram and the CVaR sums run on the device and only
the figures and the artifacts' few thousand numbers come back (copying 25,000,000 losses to the host and
sorting them there was nine tenths of a GPU job's time).
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from typing import Any, Final

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


def array_module(a: Any) -> Any:
    """NumPy, or cupy for a cupy array (imported only then: a CPU-only install has no cupy)."""
    if type(a).__module__.startswith("cupy"):
        import cupy

        return cupy
    return np


def _host(a: Any) -> np.ndarray:
    return a.get() if hasattr(a, "get") else np.asarray(a)


def quantiles(ordered: Any, levels: np.ndarray) -> np.ndarray:
    """Quantiles of a sorted sample at ``levels`` by the VaR's own convention, the ``ceil(n p)``-th order
    statistic (NumPy's ``inverted_cdf`` method), so an artifact's 99% quantile is the reported 99% VaR.
    ``ordered`` may be on the GPU; the quantiles come back as a NumPy array."""
    n = ordered.size
    index = np.clip(np.ceil(n * np.asarray(levels, dtype=np.float64)).astype(np.int64) - 1, 0, n - 1)
    return _host(ordered[array_module(ordered).asarray(index)])


def _bounds(n: int, confidence: float, interval_confidence: float) -> tuple[int, int, int]:
    """The VaR's order-statistic index and its interval's lower and upper indices among ``n`` sorted losses."""
    spread = estimators.z_score(interval_confidence) * math.sqrt(n * confidence * (1.0 - confidence))
    k = order_statistic_index(n, confidence)
    return k, max(0, math.floor(k - spread)), min(n - 1, math.ceil(k + spread))


def tail_size(n: int, confidence: float, interval_confidence: float = estimators.CONFIDENCE) -> int:
    """How many of the largest of ``n`` losses VaR, its interval and CVaR are read from (about ``(1-p) n``).

    A shard of a larger job keeps only its own largest ``tail_size(n, ...)`` losses: the job's largest that
    many are among the union of those, so VaR and CVaR come out exactly as from every loss.
    """
    return n - _bounds(n, confidence, interval_confidence)[1]


def risk_measures(
    ordered: Any, confidence: float, interval_confidence: float = estimators.CONFIDENCE, *,
    scenarios: int | None = None,
) -> tuple[estimators.Estimate, estimators.Estimate]:
    """VaR with its order-statistic interval, and CVaR with its asymptotic standard error.

    ``ordered`` is the sorted sample, or (with ``scenarios`` = the sample's size) its largest
    ``tail_size`` values, sorted (NumPy, or cupy on the GPU): the result is the same. VaR is the
    ``ceil(n p)``-th smallest loss; the interval (at ``interval_confidence``) spans the order statistics at
    ``n p -/+ z sqrt(n p (1-p))``.
    CVaR = VaR + E[(L - VaR)+] / (1 - p), whose standard error is sd((L - VaR)+) / (sqrt(n) (1 - p)).
    """
    n = ordered.size if scenarios is None else scenarios
    k, lo, hi = _bounds(n, confidence, interval_confidence)
    skipped = n - ordered.size  # losses below the kept tail
    if lo < skipped:
        raise ValueError(f"a tail of {ordered.size} losses cannot give the VaR of {n} scenarios")
    k, lo, hi = k - skipped, lo - skipped, hi - skipped
    z = estimators.z_score(interval_confidence)
    var = float(ordered[k])
    var_estimate = estimators.Estimate(var, float(ordered[hi] - ordered[lo]) / (2.0 * z), float(ordered[lo]),
                                       float(ordered[hi]), interval_confidence, n)
    excess = ordered[k:] - var  # every loss below the VaR has zero excess
    mean_excess = float(excess.sum()) / n
    var_excess = max((float(array_module(excess).dot(excess, excess)) / n - mean_excess**2) * n / (n - 1), 0.0)
    tail = 1.0 - confidence
    cvar_estimate = estimators.interval(var + mean_excess / tail, math.sqrt(var_excess) / (math.sqrt(n) * tail), n,
                                        interval_confidence)
    return var_estimate, cvar_estimate


def summarise(losses: Any, confidence: float, interval_confidence: float = estimators.CONFIDENCE) -> LossSummary:
    """Risk measures and artifacts (``loss_histogram.json``, ``loss_quantiles.npy``) of ``losses``, a NumPy
    array or a cupy array on the GPU (sorted, counted and summed there)."""
    xp = array_module(losses)
    ordered = xp.sort(losses)
    var, cvar = risk_measures(ordered, confidence, interval_confidence)
    counts, edges = xp.histogram(ordered, bins=HISTOGRAM_BINS)
    levels = np.array(REPORTED_QUANTILES)
    histogram = _histogram(confidence, var, cvar, ordered.size, _host(edges), _host(counts), levels,
                           quantiles(ordered, levels))
    buffer = io.BytesIO()
    np.save(buffer, quantiles(ordered, np.linspace(0.0, 1.0, QUANTILE_GRID)))
    artifacts = {"loss_histogram.json": histogram, "loss_quantiles.npy": buffer.getvalue()}
    return LossSummary(var, cvar, float(ordered.mean()), artifacts)


def summarise_tail(tail: np.ndarray, scenarios: int, loss_sum: float, edges: np.ndarray, counts: np.ndarray,
                   confidence: float, interval_confidence: float = estimators.CONFIDENCE) -> LossSummary:
    """What ``summarise`` reports, from the largest ``tail_size`` losses (sorted) of ``scenarios`` and their sum.

    VaR and CVaR are exactly those of every loss. The histogram is the one given (``counts`` on fixed
    ``edges``, added up over shards); its quantiles are the reported levels the tail reaches, and there is
    no ``loss_quantiles.npy``: a quantile grid from 0 to 1 needs every loss.
    """
    var, cvar = risk_measures(tail, confidence, interval_confidence, scenarios=scenarios)
    skipped = scenarios - tail.size
    levels = np.array([q for q in REPORTED_QUANTILES if order_statistic_index(scenarios, q) >= skipped])
    index = np.array([order_statistic_index(scenarios, q) - skipped for q in levels], dtype=np.int64)
    histogram = _histogram(confidence, var, cvar, scenarios, edges, counts, levels, tail[index])
    return LossSummary(var, cvar, loss_sum / scenarios, {"loss_histogram.json": histogram})


def _histogram(confidence: float, var: estimators.Estimate, cvar: estimators.Estimate, scenarios: int,
               edges: np.ndarray, counts: np.ndarray, levels: np.ndarray, values: np.ndarray) -> bytes:
    """The ``loss_histogram.json`` artifact."""
    body = {
        "confidence": confidence, "var": var.estimate, "cvar": cvar.estimate, "scenarios": int(scenarios),
        "bin_edges": np.asarray(edges).tolist(), "counts": np.asarray(counts).tolist(),
        "quantiles": dict(zip(map(str, levels.tolist()), np.asarray(values).tolist(), strict=True)),
    }
    return json.dumps(body).encode()
