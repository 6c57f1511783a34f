"""Spread and exchange options: a basket with weights of either sign, checked against Margrabe's closed form
(strike 0) and Kirk's approximation (strike > 0, a cross-check within its known error)."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest

from tests.kernels.conftest import bonferroni_z
from tests.kernels.job_input import run_raw

_N = NormalDist()
S1, S2, V1, V2, RHO, Q1, Q2, R, T = 100.0, 95.0, 0.25, 0.3, 0.4, 0.01, 0.03, 0.04, 1.5
SPREAD = {"spots": [S1, S2], "weights": [1.0, -1.0], "volatilities": [V1, V2], "correlation": [[1, RHO], [RHO, 1]],
          "dividend_yields": [Q1, Q2], "rate": R, "maturity": T}


def margrabe(first: float, second: float, vol: float, maturity: float) -> tuple[float, float]:
    """Price of max(S1 - S2, 0) from the two discounted forwards ``first``, ``second``, and its d1."""
    d1 = (math.log(first / second) + 0.5 * vol * vol * maturity) / (vol * math.sqrt(maturity))
    return first * _N.cdf(d1) - second * _N.cdf(d1 - vol * math.sqrt(maturity)), d1


def kirk(strike: float) -> float:
    """Kirk's (1995) approximation of the spread call max(S1 - S2 - K, 0)."""
    f1, f2 = S1 * math.exp((R - Q1) * T), S2 * math.exp((R - Q2) * T)
    share = f2 / (f2 + strike)
    vol = math.sqrt(V1**2 - 2 * RHO * V1 * V2 * share + (V2 * share) ** 2)
    d1 = (math.log(f1 / (f2 + strike)) + 0.5 * vol * vol * T) / (vol * math.sqrt(T))
    return math.exp(-R * T) * (f1 * _N.cdf(d1) - (f2 + strike) * _N.cdf(d1 - vol * math.sqrt(T)))


VOL = math.sqrt(V1**2 + V2**2 - 2 * RHO * V1 * V2)
FIRST, SECOND = S1 * math.exp(-Q1 * T), S2 * math.exp(-Q2 * T)


def test_exchange_option_matches_margrabe() -> None:
    """Strike 0: the call is max(S1 - S2, 0), the put max(S2 - S1, 0); delta per asset from Margrabe too."""
    z = bonferroni_z(4)
    call = run_raw("basket_option", {**SPREAD, "strike": 0.0, "paths": 200_000, "seed": 31, "greeks": ["delta"]},
                   device="cpu").summary
    exact, d1 = margrabe(FIRST, SECOND, VOL, T)
    assert call["control"] == "discounted basket (martingale)"
    assert abs(call["estimate"] - exact) < z * call["std_error"], (call["estimate"], exact)
    deltas = (math.exp(-Q1 * T) * _N.cdf(d1), -math.exp(-Q2 * T) * _N.cdf(d1 - VOL * math.sqrt(T)))
    for entry, delta in zip(call["greeks"]["delta"], deltas, strict=True):
        assert abs(entry["estimate"] - delta) < z * entry["std_error"], (entry, delta)
    put = run_raw("basket_option", {**SPREAD, "strike": 0.0, "kind": "put", "paths": 200_000, "seed": 32},
                  device="cpu").summary
    exact_put, _ = margrabe(SECOND, FIRST, VOL, T)
    assert abs(put["estimate"] - exact_put) < z * put["std_error"], (put["estimate"], exact_put)


def test_spread_call_agrees_with_kirk_within_its_approximation_error() -> None:
    """Kirk is an approximation (about 0.1-1% here), so this is a cross-check, not an exact reference."""
    s = run_raw("basket_option", {**SPREAD, "strike": 5.0, "paths": 200_000, "seed": 33}, device="cpu").summary
    reference = kirk(5.0)
    assert abs(s["estimate"] - reference) < bonferroni_z(1) * s["std_error"] + 0.01 * reference, (s, reference)


@pytest.mark.parametrize(("job", "bad", "message"), [
    ("basket_option", {"weights": [1.0, 0.0]}, "weights entries in absolute value must be at least"),
    ("basket_option", {"strike": 1e-5}, "or 0 for an exchange option"),
    ("american_option", {"strike": 0.0}, "american_option needs strike >= 0.001"),
])
def test_spreads_refuse_what_cannot_be_priced(job: str, bad: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        run_raw(job, {**SPREAD, "strike": 0.0, **bad}, device="cpu")
