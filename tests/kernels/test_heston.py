"""The Heston kernel against the semi-analytic Heston price, and that price against independent facts."""

from __future__ import annotations

import functools

import pytest

from kernels.closed_form import black_scholes
from kernels.heston_reference import HestonModel, heston_price
from tests.kernels.conftest import bonferroni_z
from tests.kernels.job_input import run_raw

CONTRACT = {"spot": 100.0, "strike": 100.0, "rate": 0.03, "dividend_yield": 0.01, "maturity": 1.0}
MODEL = {"initial_variance": 0.04, "long_variance": 0.05, "mean_reversion": 1.5, "vol_of_vol": 0.5,
         "correlation": -0.7}
HESTON = HestonModel(**MODEL)
# The semi-analytic price is two numerical Fourier integrals (a tenth of a CPU-second or more); the tests take
# it at the same arguments many times over (the base price in every difference, a spot bump in both delta and
# gamma), so the module computes each once.
_semi_analytic = functools.cache(heston_price)


def _reference(strike: float = 100.0, call: bool = True, **bump: float) -> float:
    args = {"spot": 100.0, "rate": 0.03, "maturity": 1.0, "v0": 0.04, **bump}
    model = HestonModel(args["v0"], 0.05, 1.5, 0.5, -0.7)
    return _semi_analytic(args["spot"], strike, args["rate"], 0.01, args["maturity"], model, call)


def test_semi_analytic_price_tends_to_black_scholes_without_vol_of_vol() -> None:
    flat = HestonModel(0.04, 0.04, 1.0, 1e-3, 0.0)
    for strike, call in ((90, True), (100, False), (120, True)):
        assert heston_price(100, strike, 0.05, 0.02, 2.0, flat, call) == pytest.approx(
            black_scholes(100, strike, 0.05, 0.2, 2.0, call, 0.02), rel=1e-5)


def test_semi_analytic_price_matches_quantlib() -> None:
    ql = pytest.importorskip("QuantLib")
    today = ql.Date(2, 1, 2026)
    ql.Settings.instance().evaluationDate = today
    day_count = ql.Actual365Fixed()
    rate = ql.YieldTermStructureHandle(ql.FlatForward(today, 0.03, day_count, ql.Continuous))
    dividends = ql.YieldTermStructureHandle(ql.FlatForward(today, 0.01, day_count, ql.Continuous))
    process = ql.HestonProcess(rate, dividends, ql.QuoteHandle(ql.SimpleQuote(100.0)), HESTON.initial_variance,
                               HESTON.mean_reversion, HESTON.long_variance, HESTON.vol_of_vol, HESTON.correlation)
    engine = ql.AnalyticHestonEngine(ql.HestonModel(process), 1e-12, 100_000)
    for strike in (70.0, 100.0, 130.0):
        for kind, call in ((ql.Option.Call, True), (ql.Option.Put, False)):
            option = ql.EuropeanOption(ql.PlainVanillaPayoff(kind, strike), ql.EuropeanExercise(today + 365))
            option.setPricingEngine(engine)
            assert heston_price(100.0, strike, 0.03, 0.01, 1.0, HESTON, call) == pytest.approx(option.NPV(), rel=1e-9)


@pytest.mark.slow  # enough Heston paths to test against the semi-analytic price: seconds of CPU
def test_kernel_matches_the_semi_analytic_price() -> None:
    cases = [{"kind": "call"}, {"kind": "put"}, {"kind": "call", "control_variate": False, "strike": 120.0}]
    z = bonferroni_z(len(cases))
    # 32 QE steps: the kernel's step-halving estimate of the bias there is +0.0002, +0.0002 and +0.0008 (each
    # +-0.0026 or less), under 0.035 of the tolerances (0.035, 0.035, 0.025) this test allows; none above 0.1 of
    # them over five seeds
    for i, case in enumerate(cases):
        s = run_raw("heston_option", {**CONTRACT, **MODEL, **case, "steps": 32, "paths": 300_000, "seed": 60 + i},
                    device="cpu").summary
        exact = _reference(case.get("strike", 100.0), case["kind"] == "call")
        assert s["semi_analytic"] == pytest.approx(exact, rel=1e-12)
        assert abs(s["estimate"] - exact) < z * s["std_error"], (case, s["estimate"], exact, s["std_error"])


FELLER_VIOLATED = {"initial_variance": 0.04, "long_variance": 0.04, "mean_reversion": 0.5, "vol_of_vol": 1.0,
                   "correlation": -0.9}  # 2 kappa theta = 0.04, far below xi^2 = 1


@pytest.mark.slow  # enough Heston paths to test against the semi-analytic price: seconds of CPU
def test_feller_violating_case_matches_the_semi_analytic_price() -> None:
    """Full-truncation Euler was 1-4% high here (z 27 at 1e6 paths); the QE scheme is within the error.

    64 QE steps: the step-halving bias estimate there, over five seeds, is -0.0019 +- 0.0013 (-0.0047 at 32
    steps, halving as a first-order scheme's does), a ninth of the 0.0166 allowed."""
    s = run_raw("heston_option", {**CONTRACT, **FELLER_VIOLATED, "steps": 64, "paths": 400_000, "seed": 2501},
                device="cpu").summary
    exact = heston_price(100.0, 100.0, 0.03, 0.01, 1.0, HestonModel(**FELLER_VIOLATED), True)
    assert s["discretisation"] == "Andersen QE with martingale correction"
    assert abs(s["estimate"] - exact) < bonferroni_z(1) * s["std_error"], (s["estimate"], exact, s["std_error"])
    bias = s["discretisation_bias"]
    assert abs(bias["estimate"]) < bonferroni_z(1) * bias["std_error"] + s["std_error"], bias
    assert "warning" not in bias


def test_the_step_halving_bias_is_the_difference_of_coarse_and_fine_prices() -> None:
    """The coarse twin walked on the fine path's normals has the law of an independent coarse run: its
    mean difference must equal the difference of two separate jobs at 4 and 8 steps."""
    params = {**CONTRACT, **FELLER_VIOLATED, "paths": 100_000}
    fine = run_raw("heston_option", {**params, "steps": 8, "seed": 11}, device="cpu").summary
    coarse = run_raw("heston_option", {**params, "steps": 4, "seed": 12}, device="cpu").summary
    bias = fine["discretisation_bias"]
    separate = coarse["estimate"] - fine["estimate"]
    error = (coarse["std_error"] ** 2 + fine["std_error"] ** 2 + bias["std_error"] ** 2) ** 0.5
    assert abs(bias["estimate"] - separate) < bonferroni_z(1) * error, (bias, separate, error)


def test_an_odd_step_count_says_its_bias_is_not_estimated() -> None:
    s = run_raw("heston_option", {**CONTRACT, **MODEL, "steps": 5, "paths": 2_000}, device="cpu").summary
    assert "not estimated" in s["discretisation_bias"]["method"] and "warning" in s["discretisation_bias"]


@pytest.mark.slow  # enough Heston paths to test against the semi-analytic price: seconds of CPU
def test_greeks_match_finite_differences_of_the_semi_analytic_price() -> None:
    h, e = 0.1, 1e-4
    z = bonferroni_z(10)
    for kind in ("call", "put"):
        call = kind == "call"
        reference = {
            "delta": (_reference(call=call, spot=100 + h) - _reference(call=call, spot=100 - h)) / (2 * h),
            "gamma": (_reference(call=call, spot=100 + h) - 2 * _reference(call=call)
                      + _reference(call=call, spot=100 - h)) / h**2,
            "vega": (_reference(call=call, v0=(0.2 + e) ** 2) - _reference(call=call, v0=(0.2 - e) ** 2)) / (2 * e),
            "rho": (_reference(call=call, rate=0.03 + e) - _reference(call=call, rate=0.03 - e)) / (2 * e),
            "theta": -(_reference(call=call, maturity=1 + e) - _reference(call=call, maturity=1 - e)) / (2 * e),
        }
        # 32 QE steps: the price's step-halving bias estimate there is under 0.1 x 3 of its standard errors, and
        # over five seeds each Greek's distance from its difference at 32 steps followed that at 64 (the largest,
        # gamma of the put at one seed: 3.2 errors at 32 steps, 3.1 at 64, 2.9 at 128, the paths' draw)
        s = run_raw("heston_option", {**CONTRACT, **MODEL, "kind": kind, "steps": 32, "paths": 60_000, "seed": 2,
                                      "greeks": list(reference)}, device="cpu").summary
        for name, exact in reference.items():
            greek = s["greeks"][name]
            assert abs(greek["estimate"] - exact) < z * greek["std_error"], (kind, name, greek, exact)


def _gamma_by_differences(strike: float, model: HestonModel, call: bool = True) -> float:
    """Central second difference of the semi-analytic price in spot, spot +-0.1%."""
    h = 0.1

    def price(spot: float) -> float:
        return _semi_analytic(spot, strike, 0.03, 0.01, 1.0, model, call)

    return (price(100 + h) - 2 * price(100) + price(100 - h)) / h**2


@pytest.mark.slow  # enough Heston paths to test against the semi-analytic price: seconds of CPU
def test_gamma_at_strong_negative_correlation_out_of_the_money() -> None:
    """The case where a weight on the price shock alone came out 0.0144 +- 0.0005 against 0.0240: at 50,000
    paths of 32 steps the error bar is about 0.0009, so that bias would stand some ten errors off.

    The likelihood-ratio weight divides by the first step's spread, so the error bar grows as the square root of
    the steps: 200,000 paths of 128 steps gave the same 0.0009 at sixteen times the work. At 32 steps gamma is
    within +0.0002 +- 0.0003 of the differences of the semi-analytic price (six seeds, 450,000 paths in all),
    under a quarter of the 0.0028 allowed."""
    s = run_raw("heston_option", {**CONTRACT, **MODEL, "strike": 120.0, "kind": "call", "steps": 32,
                                  "paths": 50_000, "seed": 1202, "greeks": ["gamma"]}, device="cpu").summary
    exact = _gamma_by_differences(120.0, HESTON)
    gamma = s["greeks"]["gamma"]
    assert abs(gamma["estimate"] - exact) < bonferroni_z(1) * gamma["std_error"], (gamma, exact)


@pytest.mark.slow  # enough Heston paths to test against the semi-analytic price: seconds of CPU
@pytest.mark.parametrize("correlation", [0.6, -0.9])
def test_greeks_at_other_correlations(correlation: float) -> None:
    model = {**MODEL, "correlation": correlation}
    heston = HestonModel(**model)
    # 32 QE steps: the price's step-halving bias estimate there is under 0.14 x 3 standard errors of the price
    # at either correlation, and delta and gamma stayed within 1.5 errors of the differences over five seeds
    s = run_raw("heston_option", {**CONTRACT, **model, "strike": 110.0, "kind": "put", "steps": 32,
                                  "paths": 100_000, "seed": 7, "greeks": ["delta", "gamma"]}, device="cpu").summary
    h = 0.1
    delta = (_semi_analytic(100 + h, 110.0, 0.03, 0.01, 1.0, heston, False)
             - _semi_analytic(100 - h, 110.0, 0.03, 0.01, 1.0, heston, False)) / (2 * h)
    z = bonferroni_z(2)
    for name, exact in (("delta", delta), ("gamma", _gamma_by_differences(110.0, heston, call=False))):
        greek = s["greeks"][name]
        assert abs(greek["estimate"] - exact) < z * greek["std_error"], (correlation, name, greek, exact)


def test_gamma_is_refused_at_perfect_correlation() -> None:
    with pytest.raises(ValueError, match="gamma needs \\|correlation\\| < 1"):
        run_raw("heston_option", {"correlation": -1.0, "greeks": ["gamma"]}, device="cpu")


@pytest.mark.parametrize("bad", [{"correlation": 1.5}, {"initial_variance": 0}, {"steps": 0},
                                 {"paths": 10_000_000, "steps": 10_000}, {"volatility": 0.2}])
def test_bad_heston_params_are_rejected(bad: dict) -> None:
    with pytest.raises(ValueError):
        run_raw("heston_option", bad, device="cpu")
