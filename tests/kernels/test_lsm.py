"""Longstaff-Schwartz against the binomial tree (itself checked against QuantLib and Black-Scholes) and,
under Heston, against QuantLib's finite-difference Heston Bermudan on the job's own exercise dates."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from kernels import basket, lsm
from kernels.binomial import binomial_price
from kernels.closed_form import black_scholes
from tests.kernels.conftest import bonferroni_z
from tests.kernels.job_input import run_raw

ONE = {"spots": [100.0], "weights": [1.0], "volatilities": [0.25], "rate": 0.05, "maturity": 1.0}
# Longstaff-Schwartz is low-biased: its exercise rule is at best optimal. With a cubic basis on one
# asset the rule loses well under 0.5% of the price (Longstaff and Schwartz 2001, table 1).
RULE_LOSS = 0.005
# The Heston American put the basis was found wanting on: on the basket value alone its rule was ~2% low.
HESTON_PUT = {"spots": [100.0], "weights": [1.0], "model": "heston", "strike": 100.0, "rate": 0.03,
              "dividend_yields": [0.01], "maturity": 1.0, "kind": "put", "steps": 146, "exercise_dates": 73,
              "heston": {"initial_variance": [0.04], "long_variance": [0.05], "mean_reversion": [1.5],
                         "vol_of_vol": [0.5], "correlation": [-0.7]}}


def test_binomial_tree_matches_black_scholes_without_early_exercise() -> None:
    for call in (True, False):
        assert binomial_price(100, 95, 0.03, 0.01, 0.3, 2.0, call, 4000, exercise_dates=1) == pytest.approx(
            black_scholes(100, 95, 0.03, 0.3, 2.0, call, 0.01), rel=2e-4)


@dataclass(frozen=True)
class _QuantLib:
    """QuantLib with its evaluation date set, and the day count and flat curves the references price on."""

    ql: Any
    today: Any
    day_count: Any

    @classmethod
    def start(cls) -> _QuantLib:
        """Skips the test where QuantLib is not installed."""
        ql = pytest.importorskip("QuantLib")
        today = ql.Date(2, 1, 2026)
        ql.Settings.instance().evaluationDate = today
        return cls(ql, today, ql.Actual365Fixed())

    def flat(self, rate: float) -> Any:
        """A flat, continuously compounded curve at ``rate``."""
        ql = self.ql
        return ql.YieldTermStructureHandle(ql.FlatForward(self.today, rate, self.day_count, ql.Continuous))


def test_binomial_tree_matches_quantlib_american_put() -> None:
    q = _QuantLib.start()
    ql, today = q.ql, q.today
    volatility = ql.BlackVolTermStructureHandle(ql.BlackConstantVol(today, ql.NullCalendar(), 0.3, q.day_count))
    process = ql.BlackScholesMertonProcess(ql.QuoteHandle(ql.SimpleQuote(100.0)), q.flat(0.02), q.flat(0.05),
                                           volatility)
    option = ql.VanillaOption(ql.PlainVanillaPayoff(ql.Option.Put, 110.0), ql.AmericanExercise(today, today + 365))
    option.setPricingEngine(ql.FdBlackScholesVanillaEngine(process, 800, 800))
    assert binomial_price(100, 110, 0.05, 0.02, 0.3, 1.0, False, 4000) == pytest.approx(option.NPV(), rel=1e-4)


def test_the_tree_compiles_once_whether_given_whole_numbers_or_floats() -> None:
    """numba compiles a function anew for each argument type it is called with: a spot or strike written 100
    rather than 100.0 (as in a script, or this file) cost the tree a compile of its own."""
    from numba import types

    from kernels.binomial import _backward_induction

    whole, floats = (binomial_price(s, k, 0.05, 0.0, 0.3, 1.0, False, 50, 5) for s, k in ((100, 95), (100.0, 95.0)))
    assert whole == floats
    assert {signature[:2] for signature in _backward_induction.signatures} == {(types.float64, types.float64)}


@pytest.mark.parametrize(("dates", "steps", "strike"), [(50, 50, 100.0), (4, 48, 110.0)])
def test_american_and_bermudan_puts_match_the_tree_from_below(dates: int, steps: int, strike: float) -> None:
    params = {**ONE, "kind": "put", "strike": strike, "steps": steps, "exercise_dates": dates, "paths": 100_000,
              "regression_paths": 50_000, "seed": 12}
    s = run_raw("american_option", params, device="cpu").summary
    exact = binomial_price(100, strike, 0.05, 0.0, 0.25, 1.0, False, 2000, dates)
    z = bonferroni_z(2)
    assert s["binomial_reference"] == pytest.approx(exact)
    assert s["estimate"] - exact < z * s["std_error"], (s["estimate"], exact)  # never above the true value
    assert exact - s["estimate"] < z * s["std_error"] + RULE_LOSS * exact, (s["estimate"], exact)
    assert s["early_exercise_premium"] > 0 and s["exercise_dates_used"] > 0


def test_antithetic_pairs_price_the_american_put_with_a_smaller_error() -> None:
    """A sample is the pair of walks on z and -z: the same put (the tree from below), and for the same
    number of paths a smaller standard error than single paths give."""
    params = {**ONE, "kind": "put", "strike": 100.0, "steps": 20, "paths": 60_000, "regression_paths": 20_000,
              "seed": 13}
    exact = binomial_price(100, 100, 0.05, 0.0, 0.25, 1.0, False, 2000, 20)
    single = run_raw("american_option", params, device="cpu").summary
    pairs = run_raw("american_option", {**params, "antithetic": True}, device="cpu").summary
    z = bonferroni_z(2)
    assert pairs["samples"] == 30_000 and pairs["paths"] == 60_000
    assert pairs["estimate"] - exact < z * pairs["std_error"], (pairs["estimate"], exact)
    assert exact - pairs["estimate"] < z * pairs["std_error"] + RULE_LOSS * exact, (pairs["estimate"], exact)
    assert pairs["std_error"] < single["std_error"]
    european = black_scholes(100, 100, 0.05, 0.25, 1.0, False)
    assert abs(pairs["european_estimate"] - european) < z * pairs["std_error"] + 1e-3, pairs


def test_american_call_without_dividends_is_european() -> None:
    s = run_raw("american_option", {**ONE, "kind": "call", "steps": 20, "paths": 60_000, "regression_paths": 20_000,
                                    "seed": 2}, device="cpu").summary
    exact = black_scholes(100, 100, 0.05, 0.25, 1.0)
    assert abs(s["estimate"] - exact) < bonferroni_z(1) * s["std_error"] + RULE_LOSS * exact


def test_american_basket_put_is_worth_at_least_its_european() -> None:
    params = {"spots": [100, 90], "weights": [0.5, 0.5], "volatilities": [0.3, 0.2],
              "correlation": [[1, 0.3], [0.3, 1]], "kind": "put", "strike": 100, "steps": 24, "exercise_dates": 12,
              "paths": 50_000,
              "regression_paths": 20_000, "seed": 5}
    s = run_raw("american_option", params, device="cpu").summary
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
        run_raw("american_option", {**ONE, **bad}, device="cpu")


def _fd_heston_bermudan_put(p: dict, grid: tuple[int, int, int] = (100, 200, 50)) -> float:
    """QuantLib's finite-difference Heston price of the Bermudan put exercisable at ``T k / dates`` on a
    ``grid`` of time, spot and variance points."""
    q = _QuantLib.start()
    ql, today = q.ql, q.today
    h = {key: values[0] for key, values in p["heston"].items()}
    process = ql.HestonProcess(q.flat(p["rate"]), q.flat(p["dividend_yields"][0]), ql.QuoteHandle(ql.SimpleQuote(
        p["spots"][0])), h["initial_variance"], h["mean_reversion"], h["long_variance"], h["vol_of_vol"],
        h["correlation"])
    dates = p["exercise_dates"]
    days = 365 * p["maturity"]  # Actual/365: whole days here (365 k / 73 = 5 k)
    exercise = ql.BermudanExercise([today + round(days * k / dates) for k in range(1, dates + 1)])
    option = ql.VanillaOption(ql.PlainVanillaPayoff(ql.Option.Put, p["strike"]), exercise)
    # the default 100 time, 200 spot, 50 variance points: within 0.1% of a grid twice as fine (6.8251
    # against 6.8290) at the put below
    option.setPricingEngine(ql.FdHestonVanillaEngine(ql.HestonModel(process), *grid))
    return float(option.NPV())


@pytest.mark.slow
def test_heston_american_put_matches_finite_difference_bermudan_from_below() -> None:
    # One QE step per exercise date (73), not two: the 146-step job's step-halving estimate, 73 against 146 steps
    # on common random numbers, is -0.0002 +- 0.0034, so the coarser walk moves the price by well under a quarter
    # of the 0.050 allowed above the reference (an odd step count leaves the job's own estimate out)
    params = {**HESTON_PUT, "steps": 73, "paths": 150_000, "regression_paths": 100_000, "seed": 1410}
    s = run_raw("american_option", params, device="cpu").summary
    exact = _fd_heston_bermudan_put(params)
    z = bonferroni_z(2)
    assert s["estimate"] - exact < z * s["std_error"], (s["estimate"], exact)  # never above the true value
    # a rule on the basket value alone was 2% low here (6.6955 against 6.8300 at 300,000 paths)
    assert exact - s["estimate"] < z * s["std_error"] + RULE_LOSS * exact, (s["estimate"], exact)


# 2 kappa theta = 0.04, far below xi^2 = 1: full-truncation Euler put this Bermudan at 4.75 against 4.10
FELLER_VIOLATED_PUT = {**HESTON_PUT, "steps": 24, "exercise_dates": 12,
                       "heston": {"initial_variance": [0.04], "long_variance": [0.04], "mean_reversion": [0.5],
                                  "vol_of_vol": [1.0], "correlation": [-0.9]}}
# The finite-difference price converges slowly where the Feller condition fails: on 50 x 400 x 100 points
# it is 4.0959, on 400 x 800 x 200 points 4.1006; this much is allowed for the grid.
FD_GRID_ERROR = 0.01


def test_feller_violating_heston_bermudan_put_matches_finite_difference_from_below() -> None:
    """QE steps with martingale correction under the exercise rule, and the step-halving bias report."""
    params = {**FELLER_VIOLATED_PUT, "paths": 40_000, "regression_paths": 30_000, "seed": 2502}
    s = run_raw("american_option", params, device="cpu").summary
    exact = _fd_heston_bermudan_put(params, (50, 400, 100))
    z = bonferroni_z(3)
    assert s["discretisation"] == "Andersen QE with martingale correction"
    assert s["estimate"] - exact < z * s["std_error"] + FD_GRID_ERROR, (s["estimate"], exact)
    assert exact - s["estimate"] < z * s["std_error"] + RULE_LOSS * exact + FD_GRID_ERROR, (s["estimate"], exact)
    bias = s["discretisation_bias"]
    assert "12 against 24 steps" in bias["method"] and "exercise dates" not in bias["method"], bias
    assert abs(bias["estimate"]) < z * bias["std_error"] + s["std_error"], bias


def test_heston_bias_report_says_where_step_halving_moves_the_exercise_dates() -> None:
    small = {"paths": 2_000, "regression_paths": 1_000, "seed": 3}
    american = run_raw("american_option", {**FELLER_VIOLATED_PUT, **small, "exercise_dates": None}, device="cpu")
    assert "and 12 against 24 exercise dates" in american.summary["discretisation_bias"]["method"]
    # 3 steps between dates: every other date is off the coarse grid, so no estimate, and a warning
    odd = run_raw("american_option", {**FELLER_VIOLATED_PUT, **small, "exercise_dates": 8}, device="cpu").summary
    assert "not estimated" in odd["discretisation_bias"]["method"] and "warning" in odd["discretisation_bias"]
    gbm = run_raw("american_option", {**ONE, **small, "steps": 4}, device="cpu").summary
    assert gbm["discretisation"].startswith("exact") and "discretisation_bias" not in gbm


def test_heston_rule_regresses_on_the_variance_and_the_kernel_evaluates_the_same_basis() -> None:
    rng = np.random.default_rng(3)
    u, v = rng.uniform(0.7, 1.3, 500), rng.uniform(0.0, 0.2, 500)
    degree = 3
    coeffs = rng.normal(size=(1, degree + 1 + basket.VARIANCE_TERMS + 1))
    design = lsm.basis(u, v, degree)
    assert design.shape == (500, degree + 1 + basket.VARIANCE_TERMS)
    np.testing.assert_allclose(design[:, degree + 1:], np.column_stack([v, v * v, v * u, v * u * u]))
    kernel = [basket.heston_continuation(coeffs, 0, 100.0 * a, 100.0, b) for a, b in zip(u, v, strict=True)]
    np.testing.assert_allclose(kernel, design @ coeffs[0, :-1], rtol=1e-12, atol=1e-12)
    # under GBM the kernel reads the polynomial only, from a rule with no variance columns
    gbm = np.append(coeffs[0, :degree + 1], 1.0)[None, :]
    np.testing.assert_allclose([basket.continuation(gbm, 0, 100.0 * a, 100.0) for a in u],
                               lsm.basis(u, None, degree) @ gbm[0, :-1], rtol=1e-12)


def test_heston_regression_paths_carry_the_weight_averaged_variance() -> None:
    two = {"spots": [100.0, 50.0], "weights": [1.5, 0.5], "model": "heston", "strike": 150.0, "steps": 4,
           "exercise_dates": 2, "paths": 100, "regression_paths": 1_000, "seed": 3,
           "heston": {"initial_variance": [0.04, 0.09], "long_variance": [0.04, 0.09], "mean_reversion": [1.0, 1.0],
                      "vol_of_vol": [1e-3, 1e-3], "correlation": [0.0, 0.0]}}
    from kernels.params import AmericanOptionParams

    p = AmericanOptionParams.model_validate(two)
    model = basket.Model.of(p)
    values, variance = basket.basket_values(p, model, 1_000, 2, 2, _quiet())
    assert values.shape == variance.shape == (1_000, 2)
    # variances pinned near their long-run levels (tiny vol of vol), averaged with the weights 3/4 and 1/4
    np.testing.assert_allclose(variance, 0.04 * 3 / 4 + 0.09 / 4, rtol=0.02)  # equal weights: 0.065
    gbm = AmericanOptionParams.model_validate({**ONE, "steps": 4, "exercise_dates": 2, "regression_paths": 1_000})
    assert basket.basket_values(gbm, basket.Model.of(gbm), 1_000, 2, 2, _quiet())[1] is None


def _quiet() -> object:
    from kernels.context import RunContext

    return RunContext(should_stop=lambda: False, progress=lambda _: None)


def _lstsq_rule(values: np.ndarray, p: object, variance: np.ndarray | None) -> np.ndarray:
    """The exercise rule by numpy.linalg.lstsq on the full design matrix: the reference for the fast fit."""
    dates, degree = values.shape[1], p.basis_degree
    terms = degree + 1 + (basket.VARIANCE_TERMS if variance is not None else 0)
    rule = np.zeros((dates - 1, terms + 1), dtype=np.float32)  # as the kernels read it
    values = values.astype(np.float64)
    exercise = np.maximum(p.strike - values, 0.0)  # puts
    cash = exercise[:, -1].copy()
    for date in range(dates - 2, -1, -1):
        cash *= np.exp(-p.rate * p.maturity / dates)
        itm = exercise[:, date] > 0
        if np.count_nonzero(itm) < lsm.MIN_POINTS_PER_COEFFICIENT * terms:
            continue
        design = lsm.basis(values[itm, date] / p.strike,
                           None if variance is None else variance[itm, date].astype(np.float64), degree)
        coeffs = np.linalg.lstsq(design, cash[itm], rcond=None)[0]
        where = np.flatnonzero(itm)[exercise[itm, date] >= design @ coeffs]
        cash[where] = exercise[where, date]
        rule[date, :terms], rule[date, terms] = coeffs, 1.0
    return rule


@pytest.mark.parametrize("heston", [False, True])
def test_normal_equations_fit_gives_the_lstsq_rule(heston: bool) -> None:
    from kernels.params import AmericanOptionParams

    params = {**HESTON_PUT, "steps": 24, "exercise_dates": 12} if heston else {**ONE, "kind": "put", "steps": 12}
    p = AmericanOptionParams.model_validate({**params, "regression_paths": 20_000, "seed": 4})
    model = basket.Model.of(p)
    values, variance = basket.basket_values(p, model, p.regression_paths, p.steps // 12, 12, _quiet())
    fast, reference = lsm.exercise_rule(values, p, variance), _lstsq_rule(values, p, variance)
    assert fast.shape == reference.shape and fast[:, -1].sum() == reference[:, -1].sum() > 5
    # the continuation values the two fits give on the regression paths' own states agree to the float32
    # rounding of the coefficients (terms of up to some 1e3 cancel to a continuation value of about 5)
    for date in np.flatnonzero(reference[:, -1]):
        design = lsm.basis(values[:, date].astype(np.float64) / p.strike,
                           None if variance is None else variance[:, date].astype(np.float64), p.basis_degree)
        rounding = 2.0**-23 * (np.abs(design) @ np.abs(reference[date, :-1].astype(np.float64)))
        difference = np.abs(design @ fast[date, :-1] - design @ reference[date, :-1])
        assert np.all(difference <= 2.0 * rounding), (date, float(np.max(difference / rounding)))


def test_collinear_columns_are_dropped_and_the_fit_is_the_least_squares_one() -> None:
    from kernels.params import AmericanOptionParams

    p = AmericanOptionParams.model_validate({**HESTON_PUT, "steps": 24, "exercise_dates": 12, "seed": 4})
    values, _ = basket.basket_values(p, basket.Model.of(p), 20_000, 2, 12, _quiet())
    flat = np.full(values.shape, 0.05, dtype=np.float32)  # v constant: its columns repeat 1, u and u^2
    design = lsm.basis(values[:, 5].astype(np.float64) / p.strike, flat[:, 5].astype(np.float64), 3)
    t = design.shape[1]
    coeffs = np.full(t, np.nan)
    lsm._cholesky_solve(np.tril(design.T @ design), design.T @ np.ones(len(design)), coeffs, np.empty(t),
                        np.zeros((t, t)))
    np.testing.assert_array_equal(coeffs[4:], 0.0)  # v, v^2, v u, v u^2 dropped; 1 fitted by the constant
    np.testing.assert_allclose(design @ coeffs, 1.0, rtol=1e-9)
    fast, reference = lsm.exercise_rule(values, p, flat), _lstsq_rule(values, p, flat)
    assert fast[:, -1].sum() == reference[:, -1].sum() > 5
    for date in np.flatnonzero(reference[:, -1]):
        # lstsq's minimum-norm coefficients differ from these (which leave the dropped columns at 0), but the
        # continuation values agree to the float32 rounding of either set of coefficients
        design = lsm.basis(values[:, date].astype(np.float64) / p.strike, flat[:, date].astype(np.float64), 3)
        both = np.abs(reference[date, :-1].astype(np.float64)) + np.abs(fast[date, :-1].astype(np.float64))
        rounding = 2.0**-23 * (np.abs(design) @ both)
        assert np.all(np.abs(design @ fast[date, :-1] - design @ reference[date, :-1]) <= rounding), date


@pytest.mark.parametrize(("params", "call"), [
    ({**ONE, "dividend_yields": [0.02]}, False),
    ({"spots": [100.0, 80.0], "weights": [0.6, 0.4], "volatilities": [0.3, 0.2], "rate": 0.03, "maturity": 2.0,
      "dividend_yields": [0.01, 0.0], "correlation": [[1.0, 0.4], [0.4, 1.0]]}, True),
])
def test_control_stopped_at_exercise_is_the_european_value_there(params: dict, call: bool) -> None:
    """The GBM control of an exercised path: the geometric basket option's closed form at the exercise date
    (Black-Scholes-Merton for one asset), discounted to time 0, less its mean."""
    from kernels.closed_form import geometric_basket
    from kernels.params import AmericanOptionParams

    p = AmericanOptionParams.model_validate({**params, "kind": "call" if call else "put", "strike": 95.0,
                                             "steps": 50})
    model = basket.Model.of(p)
    assert model.mode == basket.MODE_GBM
    spots, yields = np.asarray(p.spots), np.asarray(p.yields())
    vols, correlation = np.asarray(p.volatilities), np.asarray(p.correlation or np.eye(len(p.spots)))
    for done, growth in [(1, -0.3), (20, 0.05), (49, 0.1)]:
        scratch = np.zeros(basket.SCRATCH, dtype=np.float32)
        moved = spots * np.exp(growth * np.arange(1, len(spots) + 1))  # the path's prices at the date
        scratch[:len(spots)] = np.log(moved / spots)
        x = basket._stopped_control(scratch, model.assets, model.chol, len(spots), np.float32(p.strike), call,
                                    np.float32(p.rate), np.float32(model.dt), p.steps, done,
                                    np.float32(model.log_geometric), np.float32(model.total_weight),
                                    np.float32(model.control_mean))
        t = p.maturity * done / p.steps
        value = geometric_basket(moved, np.asarray(p.weights), vols, yields, correlation, p.strike, p.rate,
                                 p.maturity - t, call)
        if len(spots) == 1:
            assert value == pytest.approx(black_scholes(moved[0], p.strike, p.rate, vols[0], p.maturity - t, call,
                                                        yields[0]), rel=1e-12)
        assert float(x) + model.control_mean == pytest.approx(np.exp(-p.rate * t) * value, rel=1e-5, abs=1e-5)


def test_control_stopped_at_exercise_prices_the_american_put_with_a_fraction_of_the_error() -> None:
    """The European stopped at exercise follows the American cash flow (it equals it on every path never
    exercised): the same put, against the tree, with a variance a hundred times smaller than the cash
    flow's, where the European payoff at maturity reduced it about twofold."""
    params = {**ONE, "kind": "put", "strike": 100.0, "steps": 50, "paths": 20_000, "regression_paths": 20_000,
              "seed": 21}
    exact = binomial_price(100, 100, 0.05, 0.0, 0.25, 1.0, False, 2000, 50)
    s = run_raw("american_option", params, device="cpu").summary
    z = bonferroni_z(2)
    assert s["estimate"] - exact < z * s["std_error"], (s["estimate"], exact)
    assert exact - s["estimate"] < z * s["std_error"] + RULE_LOSS * exact, (s["estimate"], exact)
    assert s["variance_reduction"] > 50, s
    assert "exercise date" in s["control"]
    # the European keeps its own control at maturity: for one asset that is its payoff, so it is exact
    european = black_scholes(100, 100, 0.05, 0.25, 1.0, False)
    assert s["european_estimate"] == pytest.approx(european, rel=1e-4)
    plain = run_raw("american_option", {**params, "control_variate": False}, device="cpu").summary
    assert abs(plain["estimate"] - exact) < z * plain["std_error"] + RULE_LOSS * exact, (plain, exact)


def test_basket_put_with_and_without_the_stopped_control_agree() -> None:
    """On a two-asset Bermudan put the stopped geometric control must leave the estimate where the plain
    estimator (no control) puts it, with a far smaller error."""
    params = {"spots": [100, 90], "weights": [0.5, 0.5], "volatilities": [0.3, 0.2],
              "correlation": [[1, 0.3], [0.3, 1]], "kind": "put", "strike": 100, "steps": 24, "exercise_dates": 12,
              "paths": 100_000, "regression_paths": 20_000, "seed": 8}
    controlled = run_raw("american_option", params, device="cpu").summary
    plain = run_raw("american_option", {**params, "control_variate": False, "seed": 9}, device="cpu").summary
    gap = controlled["estimate"] - plain["estimate"]
    assert abs(gap) < bonferroni_z(1) * math.hypot(controlled["std_error"], plain["std_error"]), (controlled, plain)
    assert controlled["variance_reduction"] > 10, controlled
