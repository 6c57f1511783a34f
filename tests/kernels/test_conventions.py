"""What a quant relies on in a result: timing split, reproducibility, interval conventions, VaR conventions."""

from __future__ import annotations

import math

import pytest

from kernels import estimators
from kernels.closed_form import black_scholes
from tests.kernels.conftest import bonferroni_z
from tests.kernels.job_input import run_raw


def test_rate_is_taken_over_kernel_time_and_load_is_reported_apart() -> None:
    out = run_raw("european_option", {"paths": 200_000, "seed": 1}, device="cpu")
    s = out.summary
    assert s["load_s"] > 0 and s["kernel_s"] > 0
    assert s["load_s"] + s["kernel_s"] == pytest.approx(s["elapsed_s"])
    assert s["paths_per_s"] == pytest.approx(out.paths / s["kernel_s"]) == out.paths_per_s


def test_a_result_reproduces_from_its_own_params() -> None:
    first = run_raw("asian_option", {"paths": 5_000, "steps": 4, "seed": 11}, device="cpu").summary
    echoed = first["params"]
    assert echoed["seed"] == 11 and echoed["strike"] == 100.0 and echoed["confidence"] == 0.99
    again = run_raw("asian_option", echoed, device="cpu").summary
    assert again["estimate"] == first["estimate"] and again["std_error"] == first["std_error"]


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.999])
def test_confidence_is_a_parameter(confidence: float) -> None:
    s = run_raw("european_option", {"paths": 20_000, "seed": 2, "confidence": confidence}, device="cpu").summary
    half = (s["ci_high"] - s["ci_low"]) / 2 - s.get("rounding_bound", 0.0)
    assert s["confidence"] == confidence
    assert half == pytest.approx(estimators.z_score(confidence) * s["std_error"])
    with pytest.raises(ValueError):
        run_raw("european_option", {"confidence": 1.0}, device="cpu")


def test_dividend_yield_prices_match_black_scholes_merton() -> None:
    cases = [("european_option", "put", {}), ("european_option", "call", {"antithetic": False}),
             ("asian_option", "call", {"steps": 1, "control_variate": False})]
    z = bonferroni_z(len(cases))
    for job, kind, extra in cases:
        params = {"kind": kind, "dividend_yield": 0.04, "strike": 95, "paths": 200_000, "seed": 13, **extra}
        s = run_raw(job, params, device="cpu").summary
        exact = black_scholes(100, 95, 0.05, 0.2, 1.0, kind == "call", 0.04)
        assert abs(s["estimate"] - exact) < z * s["std_error"], (job, kind, s["estimate"], exact)


@pytest.mark.parametrize(("job", "params", "strike"), [
    ("european_option", {"strike": 30, "dividend_yield": 0.03}, 30),  # every path in the money: se ~ 0
    ("european_option", {"strike": 50}, 50),
    ("asian_option", {"strike": 50, "steps": 1, "rate": 0.01}, 50),  # one fixing: the control is the payoff
    ("asian_option", {"strike": 100, "steps": 1}, 100),
])
def test_intervals_cover_the_truth_where_the_control_is_nearly_perfect(job: str, params: dict, strike: float) -> None:
    s = run_raw(job, {"paths": 400_000, "seed": 5, **params}, device="cpu").summary
    p = s["params"]
    exact = black_scholes(100, strike, p["rate"], 0.2, 1.0, True, p["dividend_yield"])
    assert s["ci_low"] <= exact <= s["ci_high"], (s, exact)
    # the widening is the stated float32 bound, small against the price
    assert 0 < s["rounding_bound"] < 1e-5 * s["estimate"] + 1e-4


VAR = {"exposures": [1e6, -5e5, 2e6], "volatilities": [0.3, 0.5, 0.25], "correlation": None, "seed": 3}


def test_full_revaluation_has_zero_expected_pnl() -> None:
    """Drift-corrected shocks make each price a martingale: the mean loss is zero within its error."""
    s = run_raw("portfolio_var", {**VAR, "horizon_days": 250, "revaluation": "full", "paths": 200_000},
                device="cpu").summary
    scale = [v * math.sqrt(250 / 252) for v in VAR["volatilities"]]
    loss_sd = math.sqrt(sum(e * e * (math.exp(s2 * s2) - 1) for e, s2 in zip(VAR["exposures"], scale, strict=True)))
    assert abs(s["mean_loss"]) < 4 * loss_sd / math.sqrt(200_000)  # sd of the mean of independent positions
    assert s["horizon_trading_days"] == 250
    assert "delta_normal_var" in s and "parametric_var" not in s


def test_var_horizon_is_at_most_one_trading_year_and_interval_confidence_is_a_parameter() -> None:
    with pytest.raises(ValueError, match="252"):
        run_raw("portfolio_var", {**VAR, "horizon_days": 300, "paths": 1_000}, device="cpu")
    narrow = run_raw("portfolio_var", {**VAR, "paths": 20_000, "interval_confidence": 0.9}, device="cpu").summary
    wide = run_raw("portfolio_var", {**VAR, "paths": 20_000, "interval_confidence": 0.999}, device="cpu").summary
    assert narrow["var"] == wide["var"] and narrow["confidence"] == 0.9
    assert narrow["var_ci"][1] - narrow["var_ci"][0] < wide["var_ci"][1] - wide["var_ci"][0]


MULTI_PASS = {
    "european_option": {"paths": 20_000, "greeks": ["delta"]},
    "heston_option": {"paths": 2_000, "steps": 8, "greeks": ["vega"]},
    "american_option": {"spots": [100], "weights": [1], "volatilities": [0.2], "kind": "put", "steps": 8,
                        "paths": 5_000, "regression_paths": 5_000, "greeks": ["delta", "theta"]},
    "basket_option": {"spots": [100, 90], "weights": [1, 1], "volatilities": [0.2, 0.3], "paths": 5_000,
                      "greeks": ["vega"]},
}


@pytest.mark.parametrize("job", list(MULTI_PASS))
def test_progress_of_a_multi_pass_job_never_goes_back(job: str) -> None:
    seen: list[float] = []
    s = run_raw(job, MULTI_PASS[job], device="cpu", progress=seen.append).summary
    assert seen == sorted(seen) and seen[-1] == 1.0 and any(0.0 < f < 1.0 for f in seen)
    assert s["load_s"] + s["kernel_s"] == pytest.approx(s["elapsed_s"])


def test_every_kernel_warm_up_counts_as_loading() -> None:
    import time

    from kernels.context import Stopwatch

    clock = Stopwatch()
    started = time.perf_counter()
    clock.warmed(started)  # the first kernel: everything up to now was loading
    first = clock.warm_at
    began = time.perf_counter()
    time.sleep(0.01)
    clock.warmed(began)  # a later kernel's warm-up adds its own duration only
    assert clock.warm_at == first and clock.later_loads_s >= 0.01
    assert clock.load_s(started) == pytest.approx(first - started + clock.later_loads_s)
