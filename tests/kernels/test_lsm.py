"""Longstaff-Schwartz against the binomial tree (itself checked against QuantLib and Black-Scholes)."""

from __future__ import annotations

import pytest

from kernels.binomial import binomial_price
from kernels.closed_form import black_scholes
from kernels.jobs import run_job
from tests.kernels.conftest import bonferroni_z

ONE = {"spots": [100.0], "weights": [1.0], "volatilities": [0.25], "rate": 0.05, "maturity": 1.0}
# Longstaff-Schwartz is low-biased: its exercise rule is at best optimal. With a cubic basis on one
# asset the rule loses well under 0.5% of the price (Longstaff and Schwartz 2001, table 1).
RULE_LOSS = 0.005


def test_binomial_tree_matches_black_scholes_without_early_exercise() -> None:
    for call in (True, False):
        assert binomial_price(100, 95, 0.03, 0.01, 0.3, 2.0, call, 4000, exercise_dates=1) == pytest.approx(
            black_scholes(100, 95, 0.03, 0.3, 2.0, call, 0.01), rel=2e-4)


def test_binomial_tree_matches_quantlib_american_put() -> None:
    ql = pytest.importorskip("QuantLib")
    today = ql.Date(2, 1, 2026)
    ql.Settings.instance().evaluationDate = today
    day_count = ql.Actual365Fixed()

    def flat(rate: float) -> object:
        return ql.YieldTermStructureHandle(ql.FlatForward(today, rate, day_count, ql.Continuous))

    volatility = ql.BlackVolTermStructureHandle(ql.BlackConstantVol(today, ql.NullCalendar(), 0.3, day_count))
    process = ql.BlackScholesMertonProcess(ql.QuoteHandle(ql.SimpleQuote(100.0)), flat(0.02), flat(0.05), volatility)
    option = ql.VanillaOption(ql.PlainVanillaPayoff(ql.Option.Put, 110.0), ql.AmericanExercise(today, today + 365))
    option.setPricingEngine(ql.FdBlackScholesVanillaEngine(process, 800, 800))
    assert binomial_price(100, 110, 0.05, 0.02, 0.3, 1.0, False, 4000) == pytest.approx(option.NPV(), rel=1e-4)


@pytest.mark.parametrize(("dates", "steps", "strike"), [(50, 50, 100.0), (4, 48, 110.0)])
def test_american_and_bermudan_puts_match_the_tree_from_below(dates: int, steps: int, strike: float) -> None:
    params = {**ONE, "kind": "put", "strike": strike, "steps": steps, "exercise_dates": dates, "paths": 100_000,
              "regression_paths": 50_000, "seed": 12}
    s = run_job("american_option", params, device="cpu").summary
    exact = binomial_price(100, strike, 0.05, 0.0, 0.25, 1.0, False, 2000, dates)
    z = bonferroni_z(2)
    assert s["binomial_reference"] == pytest.approx(exact)
    assert s["estimate"] - exact < z * s["std_error"], (s["estimate"], exact)  # never above the true value
    assert exact - s["estimate"] < z * s["std_error"] + RULE_LOSS * exact, (s["estimate"], exact)
    assert s["early_exercise_premium"] > 0 and s["exercise_dates_used"] > 0


def test_american_call_without_dividends_is_european() -> None:
    s = run_job("american_option", {**ONE, "kind": "call", "steps": 20, "paths": 60_000, "regression_paths": 20_000,
                                    "seed": 2}, device="cpu").summary
    exact = black_scholes(100, 100, 0.05, 0.25, 1.0)
    assert abs(s["estimate"] - exact) < bonferroni_z(1) * s["std_error"] + RULE_LOSS * exact


def test_american_basket_put_is_worth_at_least_its_european() -> None:
    params = {"spots": [100, 90], "weights": [0.5, 0.5], "volatilities": [0.3, 0.2],
              "correlation": [[1, 0.3], [0.3, 1]], "kind": "put", "strike": 100, "steps": 24, "exercise_dates": 12,
              "paths": 50_000,
              "regression_paths": 20_000, "seed": 5}
    s = run_job("american_option", params, device="cpu").summary
    assert s["early_exercise_premium"] > 0
    assert s["exercise_dates"] == 12 and "binomial_reference" not in s


@pytest.mark.parametrize(("bad", "message"), [
    ({"steps": 50, "exercise_dates": 7}, "multiple"),
    ({"regression_paths": 10}, "regression_paths"),
    ({"steps": 10_000}, "at most 256 exercise dates"),
    ({"steps": 256, "regression_paths": 1_000_000}, "exceeds"),
])
def test_bad_exercise_schedules_are_rejected(bad: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        run_job("american_option", {**ONE, **bad}, device="cpu")
