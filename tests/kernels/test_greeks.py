"""Greeks of the CPU twins against independent references, in units of their standard errors.

References: central finite differences of the Black-Scholes formula (European options, and the Asian
option with one date, which is a European option), and for a 12-date Asian option finite differences on
common random numbers of an arithmetic-average payoff simulated here with NumPy's own generator.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernels.closed_form import black_scholes
from kernels.params import Greek
from tests.kernels.conftest import bonferroni_z
from tests.kernels.job_input import run_raw

ALL = [g.value for g in Greek]
BASE = {"spot": 100.0, "strike": 105.0, "rate": 0.05, "dividend_yield": 0.02, "volatility": 0.2, "maturity": 1.0}
EUROPEAN_CASES = [
    {"kind": "call", "antithetic": True},
    {"kind": "call", "antithetic": False},
    {"kind": "put", "antithetic": True},
    {"kind": "put", "antithetic": False},
]
ASIAN = {"spot": 100.0, "strike": 100.0, "rate": 0.05, "dividend_yield": 0.01, "volatility": 0.25, "maturity": 1.0}
ASIAN_DATES = 12


def black_scholes_greeks(spot: float, strike: float, rate: float, dividend_yield: float, volatility: float,
                         maturity: float, call: bool) -> dict[str, float]:
    """Greeks by central finite differences of the closed form (theta = -dV/dT, per year)."""

    def price(**bump: float) -> float:
        args = {"spot": spot, "rate": rate, "volatility": volatility, "maturity": maturity, **bump}
        return black_scholes(args["spot"], strike, args["rate"], args["volatility"], args["maturity"], call,
                             dividend_yield)

    h, e = 1e-3 * spot, 1e-5
    return {
        "delta": (price(spot=spot + h) - price(spot=spot - h)) / (2 * h),
        "gamma": (price(spot=spot + h) - 2 * price() + price(spot=spot - h)) / h**2,
        "vega": (price(volatility=volatility + e) - price(volatility=volatility - e)) / (2 * e),
        "rho": (price(rate=rate + e) - price(rate=rate - e)) / (2 * e),
        "theta": -(price(maturity=maturity + e) - price(maturity=maturity - e)) / (2 * e),
    }


def test_european_greeks_match_finite_differences_of_black_scholes() -> None:
    z = bonferroni_z(len(EUROPEAN_CASES) * len(ALL))
    for i, case in enumerate(EUROPEAN_CASES):
        s = run_raw("european_option", {**BASE, **case, "paths": 300_000, "seed": 40 + i, "greeks": ALL},
                    device="cpu").summary
        reference = black_scholes_greeks(**BASE, call=case["kind"] == "call")
        for name, exact in reference.items():
            greek = s["greeks"][name]
            assert abs(greek["estimate"] - exact) < z * greek["std_error"], (case, name, greek, exact)
            assert greek["ci_low"] < greek["estimate"] < greek["ci_high"] and greek["method"]


def test_only_requested_greeks_are_returned_and_the_price_is_unchanged() -> None:
    params = {**BASE, "paths": 50_000, "seed": 7}
    plain = run_raw("european_option", params, device="cpu").summary
    with_greeks = run_raw("european_option", {**params, "greeks": ["delta", "vega"]}, device="cpu").summary
    assert "greeks" not in plain
    assert set(with_greeks["greeks"]) == {"delta", "vega"}
    assert with_greeks["estimate"] == plain["estimate"]
    assert with_greeks["greeks"]["delta"]["method"] == "pathwise"


def test_asian_greeks_with_one_date_match_black_scholes() -> None:
    z = bonferroni_z(len(ALL))
    s = run_raw("asian_option", {**ASIAN, "steps": 1, "paths": 200_000, "seed": 3, "greeks": ALL},
                device="cpu").summary
    for name, exact in black_scholes_greeks(**ASIAN, call=True).items():
        greek = s["greeks"][name]
        assert abs(greek["estimate"] - exact) < z * greek["std_error"], (name, greek, exact)


def _numpy_asian_payoffs(normals: np.ndarray, spot: float, rate: float, volatility: float,
                         maturity: float) -> np.ndarray:
    dt = maturity / normals.shape[1]
    drift = (rate - ASIAN["dividend_yield"] - 0.5 * volatility**2) * dt
    log_growth = np.cumsum(drift + volatility * math.sqrt(dt) * normals, axis=1)
    average = spot * np.exp(log_growth).mean(axis=1)
    return math.exp(-rate * maturity) * np.maximum(average - ASIAN["strike"], 0.0)


def _finite_difference(normals: np.ndarray, name: str, step: float) -> tuple[float, float]:
    """Central difference on common random numbers, with its standard error (the paths are paired)."""
    base = {k: ASIAN[k] for k in ("spot", "rate", "volatility", "maturity")}
    up = _numpy_asian_payoffs(normals, **{**base, name: base[name] + step})
    down = _numpy_asian_payoffs(normals, **{**base, name: base[name] - step})
    if name == "spot" and step > 1.0:  # second difference: gamma
        middle = _numpy_asian_payoffs(normals, **base)
        samples = (up - 2 * middle + down) / step**2
    else:
        samples = (up - down) / (2 * step)
    return float(samples.mean()), float(samples.std(ddof=1) / math.sqrt(samples.size))


@pytest.mark.slow  # finite differences need many paths per bump
@pytest.mark.timeout(120)
def test_asian_greeks_match_finite_differences_on_common_random_numbers() -> None:
    normals = np.random.default_rng(1).standard_normal((300_000, ASIAN_DATES))
    reference = {
        "delta": _finite_difference(normals, "spot", 0.01),
        "gamma": _finite_difference(normals, "spot", 2.0),
        "vega": _finite_difference(normals, "volatility", 1e-4),
        "rho": _finite_difference(normals, "rate", 1e-4),
        "theta": _finite_difference(normals, "maturity", 1e-4),
    }
    reference["theta"] = (-reference["theta"][0], reference["theta"][1])
    s = run_raw("asian_option", {**ASIAN, "steps": ASIAN_DATES, "paths": 200_000, "seed": 3, "greeks": ALL},
                device="cpu").summary
    z = bonferroni_z(len(reference))
    for name, (value, std_error) in reference.items():
        greek = s["greeks"][name]
        assert abs(greek["estimate"] - value) < z * math.hypot(greek["std_error"], std_error), (name, greek, value)


def test_repeated_greeks_are_rejected() -> None:
    with pytest.raises(ValueError, match="greeks must not repeat"):
        run_raw("european_option", {"greeks": ["delta", "delta"]}, device="cpu")
    with pytest.raises(ValueError):
        run_raw("european_option", {"greeks": ["charm"]}, device="cpu")


@pytest.mark.parametrize("example", ["european_option", "asian_option", "heston_option", "basket_option",
                                     "american_option", "option_book"])
def test_every_type_with_greeks_refuses_a_repeated_greek(example: str) -> None:
    import json
    from pathlib import Path

    from pydantic import ValidationError

    from kernels.params import parse_params

    job = json.loads((Path(__file__).resolve().parents[2] / "examples" / f"{example}.json").read_text())
    params = {**job.get("params", {}), "greeks": ["delta", "delta"]}
    with pytest.raises(ValidationError, match="greeks must not repeat"):
        parse_params(job["type"], params)
    parse_params(job["type"], {**params, "greeks": ["delta"]})  # the same request with distinct greeks parses
