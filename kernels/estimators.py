"""Estimates, standard errors and confidence intervals from the per-block sums the kernels return.

The option kernels never write a path-level array: they return five running sums per block, over
samples (a path, or an antithetic pair of paths) of the discounted payoff ``y`` and of a control ``x``
whose expectation is known and already subtracted (so ``E[x] = 0``):
``[sum y, sum y^2, sum x, sum x^2, sum x*y]``. Everything here is computed from those.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any, Final

import numpy as np
from numba.core.extending import register_jitable

from kernels.params import DEFAULT_CONFIDENCE

# Default confidence of reported intervals (a job's ``confidence`` param overrides it).
CONFIDENCE: Final = DEFAULT_CONFIDENCE
SUM_WIDTH: Final = 5  # sum y, sum y^2, sum x, sum x^2, sum x*y
# Bound on the systematic relative error of a float32 sample, the part that does not average out: the
# float32 constants a sample is computed from (spot, strike, forward, discount: 2^-24 = 6e-8 relative
# each, the same error in every sample). exp32/log32 errors (< 5e-7 per value, kernels.special) change
# sign from sample to sample and average out (mean relative bias of exp32 about 4e-9), as do the float32
# operations' roundings. Intervals are widened by this bound times the size of the terms averaged (see
# ``from_sums``); it matters only where the standard error is tiny, e.g. with a near-perfect control.
FLOAT32_SAMPLE_ERROR: Final = 2.5e-7
# Relative rounding of one float64 input cast to float32 (half an ulp). A finite-difference Greek divides
# by a bump ``h`` while the kernel applies the float32-rounded bumped input: the effective bump is off by
# up to two such roundings of the input, ``2 x 2^-24 x (1 + h) / h`` relative (``bump_rounding``).
FLOAT32_INPUT_ERROR: Final = 2.0**-24


@dataclass(frozen=True)
class Estimate:
    """A Monte Carlo estimate with its standard error and a normal-approximation confidence interval."""

    estimate: float
    std_error: float
    ci_low: float
    ci_high: float
    confidence: float
    samples: int
    control_beta: float | None = None
    variance_reduction: float | None = None  # sample variance of y / variance of the estimator's terms
    rounding_bound: float | None = None  # float32 rounding bound added to each side of the interval

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe fields, ``None`` ones left out."""
        return {k: v for k, v in asdict(self).items() if v is not None}


@register_jitable
def add_sample(sums, y, x):  # type: ignore[no-untyped-def]
    """``sums`` (y, y^2, x, x^2, xy) with one more sample, accumulated in float64 (kernel code)."""
    y = np.float64(y)
    x = np.float64(x)
    return sums[0] + y, sums[1] + y * y, sums[2] + x, sums[3] + x * x, sums[4] + x * y


def z_score(confidence: float) -> float:
    """Two-sided standard-normal quantile for ``confidence``."""
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def interval(estimate: float, std_error: float, samples: int, confidence: float = CONFIDENCE,
             rounding: float = 0.0, **extra: Any) -> Estimate:
    """Wrap ``estimate`` and ``std_error`` with the two-sided interval at ``confidence``, widened by ``rounding``.

    ``rounding`` bounds the estimate's systematic float32 error (0 for exact arithmetic): it is added to
    the statistical half-width ``z * std_error`` on each side, so the interval covers both.
    """
    half = z_score(confidence) * std_error + rounding
    if rounding > 0:
        extra["rounding_bound"] = rounding
    return Estimate(estimate, std_error, estimate - half, estimate + half, confidence, samples, **extra)


def rounding_bound(magnitude: float) -> float:
    """Bound on the float32 error of a mean of samples whose summed terms have mean size ``magnitude``."""
    return FLOAT32_SAMPLE_ERROR * abs(magnitude)


def bump_rounding(bump: float, scale: float = 1.0) -> float:
    """Relative error of a central difference from float32 rounding of its bumped inputs.

    ``bump`` is the difference's step relative to ``scale``, the input's size (a relative bump of 1%:
    ``bump_rounding(0.01)``; an absolute rate bump of 1e-3 on a rate of 5%: ``bump_rounding(1e-3, 0.05)``).
    """
    return 2.0 * FLOAT32_INPUT_ERROR * (abs(scale) + bump) / bump


def from_sums(sums: np.ndarray, samples: int, *, control_variate: bool, confidence: float = CONFIDENCE,
              control_scale: float = 0.0) -> Estimate:
    """Plain or control-variate estimate of ``E[y]`` from the five sums over ``samples`` samples.

    With the control, ``y - beta * x`` with the variance-minimising ``beta = cov(x, y) / var(x)``; the
    residual variance uses ``n - 2`` degrees of freedom because ``beta`` is estimated from the same data.
    The interval is widened by the float32 rounding bound of the terms averaged: ``|mean y|`` and
    ``|beta| * control_scale``, ``control_scale`` being the size of the float32 terms ``x`` is made of
    (for ``x = e^{-rT} S_T - S_0``, about ``2 S_0``). With a near-perfect control (a deep in-the-money
    call) the standard error falls to float32 rounding and only this bound keeps the truth covered.
    """
    if samples < 3:
        raise ValueError("at least three samples are needed for a standard error")
    sy, syy, sx, sxx, sxy = (float(v) for v in sums)
    n = samples
    mean_y = sy / n
    var_y = max((syy - sy * sy / n) / (n - 1), 0.0)
    if not control_variate:
        return interval(mean_y, math.sqrt(var_y / n), n, confidence, rounding_bound(mean_y))
    var_x = (sxx - sx * sx / n) / (n - 1)
    cov = (sxy - sx * sy / n) / (n - 1)
    beta = cov / var_x if var_x > 0 else 0.0
    residual = max((var_y - beta * cov) * (n - 1) / (n - 2), 0.0)
    gain = var_y / residual if residual > 0 else math.inf
    rounding = rounding_bound(abs(mean_y) + abs(beta) * abs(control_scale))
    return interval(mean_y - beta * sx / n, math.sqrt(residual / n), n, confidence, rounding,
                    control_beta=beta, variance_reduction=gain)
