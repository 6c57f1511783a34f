"""Closed forms the kernels are checked against: Black-Scholes, the discretely monitored geometric
Asian option, and delta-normal VaR/CVaR (exact for a linear portfolio under normal shocks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

_N = NormalDist()


def _discounted_lognormal_option(log_mean: float, log_var: float, strike: float, discount: float, call: bool) -> float:
    """``discount * E[(X - K)^+]`` (or the put) for ``log X ~ Normal(log_mean, log_var)``."""
    sd = math.sqrt(log_var)
    d1 = (log_mean - math.log(strike) + log_var) / sd
    d2 = d1 - sd
    forward = math.exp(log_mean + log_var / 2.0)
    if call:
        return discount * (forward * _N.cdf(d1) - strike * _N.cdf(d2))
    return discount * (strike * _N.cdf(-d2) - forward * _N.cdf(-d1))


def black_scholes(
    spot: float, strike: float, rate: float, volatility: float, maturity: float, call: bool = True,
    dividend_yield: float = 0.0,
) -> float:
    """Black-Scholes(-Merton) price of a European call (or put) on an asset with a continuous dividend yield."""
    log_mean = math.log(spot) + (rate - dividend_yield - 0.5 * volatility**2) * maturity
    return _discounted_lognormal_option(log_mean, volatility**2 * maturity, strike, math.exp(-rate * maturity), call)


def geometric_asian(
    spot: float, strike: float, rate: float, volatility: float, maturity: float, steps: int, call: bool = True,
    dividend_yield: float = 0.0,
) -> float:
    """Price of an option on the geometric average of the ``steps`` prices at ``T*j/steps``, j = 1..steps.

    The log of that average is normal with mean ``log S + (r - q - s^2/2) T (m+1)/(2m)`` and variance
    ``s^2 T (m+1)(2m+1)/(6 m^2)``.
    """
    m = steps
    log_mean = math.log(spot) + (rate - dividend_yield - 0.5 * volatility**2) * maturity * (m + 1) / (2 * m)
    log_var = volatility**2 * maturity * (m + 1) * (2 * m + 1) / (6 * m * m)
    return _discounted_lognormal_option(log_mean, log_var, strike, math.exp(-rate * maturity), call)


def geometric_basket(spots: np.ndarray, weights: np.ndarray, volatilities: np.ndarray, dividend_yields: np.ndarray,
                     correlation: np.ndarray, strike: float, rate: float, maturity: float, call: bool = True) -> float:
    """Price of an option on ``W prod S_i(T)^(w_i / W)``, ``W = sum w_i``: the geometric twin of the basket
    ``sum w_i S_i(T)`` under correlated GBM. Its log is normal with mean
    ``log W + sum (w_i/W) (log S_i + (r - q_i - s_i^2/2) T)`` and variance ``T u' C u``, ``u = (w/W) * s``.
    """
    total = float(np.sum(weights))
    share = np.asarray(weights, dtype=float) / total
    log_mean = math.log(total) + float(share @ (np.log(spots) + (rate - dividend_yields - 0.5 * volatilities**2)
                                                * maturity))
    scaled = share * volatilities
    log_var = float(scaled @ correlation @ scaled) * maturity
    return _discounted_lognormal_option(log_mean, log_var, strike, math.exp(-rate * maturity), call)


@dataclass(frozen=True)
class ParametricRisk:
    """VaR and CVaR (expected shortfall) of a normally distributed loss with mean zero."""

    var: float
    cvar: float
    loss_std: float


def delta_normal_var(exposures: np.ndarray, covariance: np.ndarray, confidence: float) -> ParametricRisk:
    """Delta-normal VaR/CVaR: of the loss ``-exposures . shocks`` with ``shocks ~ Normal(0, covariance)``.

    Exact for linear revaluation; for full revaluation it is the first-order (delta) approximation.
    """
    sd = math.sqrt(float(exposures @ covariance @ exposures))
    z = _N.inv_cdf(confidence)
    return ParametricRisk(var=z * sd, cvar=sd * _N.pdf(z) / (1.0 - confidence), loss_std=sd)
