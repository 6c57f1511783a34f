"""Every reported interval, price or Greek, contains the float32 rounding bound, checked against closed forms.

The cases are the ones where the samples barely vary, so the standard error falls to ~1e-8 and float32
rounding, not sampling, is the error: an at-the-money European rho on antithetic pairs (each pair's
rho is the same constant) and a deep in-the-money basket call, whose finite-difference rho is the same
on every path.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest

from kernels.closed_form import black_scholes
from tests.kernels.job_input import run_raw


def _inside(entry: dict, exact: float) -> bool:
    return entry["ci_low"] <= exact <= entry["ci_high"]


def test_european_rho_interval_contains_the_closed_form() -> None:
    """S = K = 100, r 5%, q 3%, sigma 20%: the interval once excluded the truth (47.56147404 +- 7.5e-9)."""
    s = run_raw("european_option", {"spot": 100.0, "strike": 100.0, "rate": 0.05, "dividend_yield": 0.03,
                                    "volatility": 0.2, "maturity": 1.0, "paths": 2_000_000, "seed": 1301,
                                    "greeks": ["rho"]}, device="cpu").summary
    d2 = (0.05 - 0.03 - 0.5 * 0.2**2) / 0.2
    exact = 100.0 * math.exp(-0.05) * NormalDist().cdf(d2)  # K T e^{-rT} N(d2)
    rho = s["greeks"]["rho"]
    assert rho["std_error"] < 1e-7  # the case: sampling error is not what is left
    assert _inside(rho, exact), (rho, exact)
    assert rho["rounding_bound"] > 0


@pytest.mark.slow  # a million basket paths with a bumped revaluation for rho
def test_deep_in_the_money_basket_price_and_rho_contain_the_truth() -> None:
    """A one-asset GBM basket call struck at 20: every path ends in the money (P(miss) ~ 1e-16), so the
    price is ``S - K e^{-rT}`` and each path's finite-difference rho is ``K T e^{-rT}``."""
    s = run_raw("basket_option", {"spots": [100.0], "weights": [1.0], "volatilities": [0.2], "strike": 20.0,
                                  "rate": 0.05, "maturity": 1.0, "paths": 1_000_000, "seed": 1301,
                                  "greeks": ["rho"]}, device="cpu").summary
    assert _inside(s, black_scholes(100.0, 20.0, 0.05, 0.2, 1.0, True)), s
    rho = s["greeks"]["rho"]
    assert _inside(rho, 20.0 * math.exp(-0.05)), rho
    assert rho["rounding_bound"] > 0
