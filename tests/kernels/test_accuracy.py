"""CPU twins against closed forms, in units of their own standard error (Bonferroni across cases)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernels import asian
from kernels.closed_form import black_scholes
from kernels.context import RunContext
from kernels.launch import sum_blocks
from kernels.params import AsianOptionParams
from tests.kernels.conftest import bonferroni_z
from tests.kernels.job_input import run_raw

EUROPEAN_CASES = [
    {"kind": "call", "antithetic": True, "control_variate": True},
    {"kind": "put", "antithetic": True, "control_variate": True},
    {"kind": "call", "antithetic": False, "control_variate": False},
    {"kind": "put", "antithetic": True, "control_variate": False, "strike": 120, "volatility": 0.35},
]


def _context() -> RunContext:
    return RunContext(should_stop=lambda: False, progress=lambda _: None)


def test_european_twin_matches_black_scholes() -> None:
    z = bonferroni_z(len(EUROPEAN_CASES))
    for i, case in enumerate(EUROPEAN_CASES):
        params = {"spot": 100, "strike": 100, "rate": 0.05, "volatility": 0.2, "maturity": 1.0,
                  "paths": 400_000, "seed": 100 + i, **case}
        s = run_raw("european_option", params, device="cpu").summary
        exact = black_scholes(100, params["strike"], 0.05, params["volatility"], 1.0, case["kind"] == "call")
        assert abs(s["estimate"] - exact) < z * s["std_error"], (case, s["estimate"], exact, s["std_error"])
        assert s["ci_low"] < s["estimate"] < s["ci_high"]


def test_control_variate_and_antithetics_shrink_the_standard_error() -> None:
    base = {"paths": 200_000, "seed": 9}
    plain = run_raw("european_option", {**base, "antithetic": False, "control_variate": False}, device="cpu")
    reduced = run_raw("european_option", base, device="cpu")
    assert reduced.summary["std_error"] < plain.summary["std_error"] / 3
    assert reduced.summary["variance_reduction"] > 5


def test_asian_twin_with_one_date_matches_black_scholes() -> None:
    """With one date both averages are the terminal price: a European option."""
    exact = black_scholes(100, 95, 0.03, 0.25, 0.5)
    base = {"strike": 95, "rate": 0.03, "volatility": 0.25, "maturity": 0.5, "steps": 1, "paths": 200_000, "seed": 8}
    plain = run_raw("asian_option", {**base, "control_variate": False}, device="cpu").summary
    assert abs(plain["estimate"] - exact) < 3 * plain["std_error"]
    # the control is then the payoff itself: exact up to the float32 rounding of the inputs
    controlled = run_raw("asian_option", base, device="cpu").summary
    assert controlled["estimate"] == pytest.approx(exact, rel=1e-6)


def test_asian_geometric_paths_match_their_closed_form() -> None:
    """The control's simulated mean must be zero: the simulated geometric option prices at its formula."""
    z = bonferroni_z(2)
    for kind in ("call", "put"):
        p = AsianOptionParams(paths=100_000, steps=24, seed=3, kind=kind)
        n = p.paths
        _, _, sx, sxx, _ = sum_blocks(asian.kernel_for(p.steps), -(-n // asian.PATHS_PER_BLOCK),
                                      asian.kernel_args(p, n), "cpu", _context())
        std_error = math.sqrt((sxx - sx * sx / n) / (n - 1) / n)
        assert abs(sx / n) < z * std_error


def test_asian_control_variate_agrees_with_plain_estimate() -> None:
    base = {"paths": 100_000, "steps": 32, "seed": 21}
    cv = run_raw("asian_option", base, device="cpu").summary
    plain = run_raw("asian_option", {**base, "control_variate": False}, device="cpu").summary
    assert abs(cv["estimate"] - plain["estimate"]) < 3 * plain["std_error"]
    assert cv["std_error"] < plain["std_error"] / 10


@pytest.mark.parametrize("confidence", [0.95, 0.99])
def test_linear_portfolio_var_and_cvar_match_the_parametric_values(confidence: float) -> None:
    z = bonferroni_z(2)
    params = {"exposures": [1e6, -4e5, 2.5e6], "volatilities": [0.2, 0.35, 0.15],
              "correlation": [[1, 0.6, 0.1], [0.6, 1, -0.2], [0.1, -0.2, 1]],
              "horizon_days": 10, "confidence": confidence, "paths": 400_000, "seed": 17}
    s = run_raw("portfolio_var", params, device="cpu").summary
    assert abs(s["var"] - s["delta_normal_var"]) < z * s["var_std_error"]
    assert abs(s["cvar"] - s["delta_normal_cvar"]) < z * s["cvar_std_error"]


def test_full_revaluation_is_close_to_linear_for_small_shocks() -> None:
    params = {"exposures": [1e6, 2e6], "volatilities": [0.1, 0.12], "horizon_days": 1, "paths": 100_000, "seed": 2}
    linear = run_raw("portfolio_var", params, device="cpu").summary
    full = run_raw("portfolio_var", {**params, "revaluation": "full"}, device="cpu").summary
    assert full["var"] == pytest.approx(linear["var"], rel=0.02)
    assert full["var"] < linear["var"]  # long positions: convexity of exp cushions the loss


def test_random_walk_averages_have_mean_zero_and_variance_one_over_steps() -> None:
    z = bonferroni_z(2)
    n, steps = 20_000, 50
    s = run_raw("random_walk", {"paths": n, "steps": steps, "seed": 8}, device="cpu").summary
    assert abs(s["estimate"]) < z * s["std_error"]
    expected_sd = 1 / math.sqrt(steps)
    assert abs(s["path_average_std"] - expected_sd) < z * expected_sd / math.sqrt(2 * n)
    assert np.isclose(s["expected_path_average_std"], expected_sd)
