"""Basket and Longstaff-Schwartz Greeks (finite differences on common random numbers) against independent
references: finite differences of the binomial tree and of the two-asset basket quadrature."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from kernels import fd_greeks
from kernels.binomial import binomial_price
from kernels.heston_reference import HestonModel, heston_price
from kernels.params import MAX_FD_GREEK_PATHS, AmericanOptionParams, BasketOptionParams, Greek
from tests.kernels.conftest import bonferroni_z
from tests.kernels.job_input import run_raw
from tests.kernels.test_basket import TWO, two_asset_basket_call

ALL = [g.value for g in Greek]
# The fitted exercise rule is not the optimal one: its price is within 0.5% of the tree's, its Greeks
# (derivatives of that rule's value) are allowed 2% of the tree's on top of the statistical error.
RULE_GREEK_LOSS = 0.02
TREE_STEPS = 2_000


def _one(greeks: dict, name: str) -> dict:
    entry = greeks[name]
    return entry[0] if isinstance(entry, list) else entry


@pytest.mark.slow  # bumped revaluations at enough paths to meet the reference
def test_american_put_greeks_match_the_binomial_tree() -> None:
    dates, spot, vol, rate, maturity = 10, 100.0, 0.25, 0.05, 1.0
    p = {"spots": [spot], "weights": [1.0], "volatilities": [vol], "rate": rate, "maturity": maturity, "kind": "put",
         "steps": 40, "exercise_dates": dates, "paths": 40_000, "regression_paths": 40_000, "seed": 5, "greeks": ALL}
    greeks = run_raw("american_option", p, device="cpu").summary["greeks"]

    def tree(s: float = spot, r: float = rate, v: float = vol, t: float = maturity) -> float:
        return binomial_price(s, 100.0, r, 0.0, v, t, False, TREE_STEPS, dates)

    h = 1.0  # the tree's own bumps, not the estimator's: an independent central difference
    reference = {
        "delta": (tree(s=spot + h) - tree(s=spot - h)) / (2 * h),
        "gamma": (tree(s=spot + 2 * h) - 2 * tree() + tree(s=spot - 2 * h)) / (2 * h) ** 2,
        "vega": (tree(v=vol + 0.01) - tree(v=vol - 0.01)) / 0.02,
        "rho": (tree(r=rate + 0.001) - tree(r=rate - 0.001)) / 0.002,
        "theta": -(tree(t=maturity + 0.02) - tree(t=maturity - 0.02)) / 0.04,
    }
    z = bonferroni_z(len(reference))
    for name, exact in reference.items():
        got = _one(greeks, name)
        assert abs(got["estimate"] - exact) < z * got["std_error"] + RULE_GREEK_LOSS * abs(exact), (name, got, exact)
        assert got["method"] == fd_greeks.METHODS[Greek(name)]


@pytest.mark.slow  # bumped revaluations at enough paths to meet the reference
def test_basket_greeks_per_asset_match_the_quadrature() -> None:
    params = {**TWO, "paths": 100_000, "seed": 9, "greeks": ALL}
    greeks = run_raw("basket_option", params, device="cpu").summary["greeks"]

    def quad(spots: list[float] = TWO["spots"], vols: list[float] = TWO["volatilities"], rate: float = TWO["rate"],
             maturity: float = TWO["maturity"]) -> float:
        return two_asset_basket_call(spots, TWO["weights"], vols, 0.4, TWO["dividend_yields"], TWO["strike"], rate,
                                     maturity)

    def bumped(values: list[float], i: int, by: float) -> list[float]:
        return [v + by if k == i else v for k, v in enumerate(values)]

    reference: list[tuple[str, int | None, float]] = []
    for i in range(2):
        h = 0.5  # the quadrature's own bumps
        up, down = quad(spots=bumped(TWO["spots"], i, h)), quad(spots=bumped(TWO["spots"], i, -h))
        reference += [("delta", i, (up - down) / (2 * h)), ("gamma", i, (up - 2 * quad() + down) / h**2),
                      ("vega", i, (quad(vols=bumped(TWO["volatilities"], i, 0.005))
                                   - quad(vols=bumped(TWO["volatilities"], i, -0.005))) / 0.01)]
    rate, maturity = TWO["rate"], TWO["maturity"]
    reference += [("rho", None, (quad(rate=rate + 1e-4) - quad(rate=rate - 1e-4)) / 2e-4),
                  ("theta", None, -(quad(maturity=maturity + 0.01) - quad(maturity=maturity - 0.01)) / 0.02)]
    z = bonferroni_z(len(reference))
    for name, i, exact in reference:
        got = greeks[name][i] if i is not None else greeks[name]
        assert abs(got["estimate"] - exact) < z * got["std_error"], (name, i, got, exact)
        assert got["ci_low"] < got["estimate"] < got["ci_high"] and got["samples"] == 100_000


@pytest.mark.slow  # bumped revaluations at enough paths to meet the reference
def test_heston_basket_greeks_match_the_heston_integral() -> None:
    """One Heston asset: vega is to the initial volatility sqrt(v0); the reference is the semi-analytic price,
    differenced with its own bumps."""
    heston = {"initial_variance": [0.04], "long_variance": [0.05], "mean_reversion": [1.5], "vol_of_vol": [0.5],
              "correlation": [-0.7]}
    params = {"spots": [100.0], "weights": [1.0], "model": "heston", "heston": heston, "rate": 0.03,
              "dividend_yields": [0.01], "steps": 16, "paths": 20_000, "seed": 4, "greeks": ALL}
    greeks = run_raw("basket_option", params, device="cpu").summary["greeks"]

    def price(s: float = 100.0, r: float = 0.03, vol: float = 0.2, t: float = 1.0) -> float:
        return heston_price(s, 100.0, r, 0.01, t, HestonModel(vol**2, 0.05, 1.5, 0.5, -0.7))

    reference = {
        "delta": (price(s=100.5) - price(s=99.5)) / 1.0,
        "gamma": (price(s=100.5) - 2 * price() + price(s=99.5)) / 0.25,
        "vega": (price(vol=0.201) - price(vol=0.199)) / 0.002,
        "rho": (price(r=0.0305) - price(r=0.0295)) / 0.001,
        "theta": -(price(t=1.005) - price(t=0.995)) / 0.01,
    }
    z = bonferroni_z(len(reference))
    for name, exact in reference.items():
        got = _one(greeks, name)
        assert abs(got["estimate"] - exact) < z * got["std_error"], (name, got, exact)


def test_common_random_numbers_make_the_differences_precise() -> None:
    """Independent paths per revaluation would give a delta standard error of about price SE x sqrt(2) / (2h);
    common random numbers make it far smaller."""
    s = run_raw("basket_option", {**TWO, "paths": 20_000, "seed": 3, "greeks": ["delta"], "control_variate": False},
                device="cpu").summary
    independent = s["std_error"] * math.sqrt(2) / (2 * fd_greeks.SPOT_BUMP * TWO["spots"][0])
    assert s["greeks"]["delta"][0]["std_error"] < independent / 10


def test_revaluations_in_several_chunks_equal_one_chunk_and_hand_the_cpu_kernel_one_layout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """numba compiles a kernel anew for each array layout it is handed. The warm-up and the image build run
    one-chunk jobs; a job of several chunks once handed the kernel a column slice (another layout) and paid a
    second compile (some 12 CPU-seconds) after the worker's warm-up."""
    params = {**TWO, "paths": 1_000, "seed": 8, "greeks": ["delta", "rho"]}
    whole = run_raw("basket_option", params, device="cpu").summary["greeks"]
    monkeypatch.setattr(fd_greeks, "CPU_CHUNK_ASSET_STEPS", 1)  # a block of paths per chunk: four chunks
    chunked = run_raw("basket_option", params, device="cpu").summary["greeks"]

    assert chunked == whole  # each chunk's cash flows land in their own columns
    assert {signature[0].layout for signature in fd_greeks._cpu_case_cash_flows.signatures} == {"C"}


def test_differences_of_a_known_function_are_its_derivatives() -> None:
    """The bumps and the difference arithmetic, on a valuation with known derivatives (Heston: vega to sqrt(v0))."""
    heston = {"initial_variance": [0.04, 0.09], "long_variance": [0.04, 0.04], "mean_reversion": [1.0, 1.0],
              "vol_of_vol": [0.3, 0.3], "correlation": [-0.5, -0.5]}
    p = AmericanOptionParams(spots=[100.0, 50.0], weights=[1.0, 1.0], model="heston", heston=heston, steps=8)

    def value(q: AmericanOptionParams) -> float:
        assert q.heston is not None
        return (sum((i + 1) * s**3 for i, s in enumerate(q.spots)) + 7 * q.rate - 3 * q.maturity**2
                + sum((i + 2) * math.sqrt(v) for i, v in enumerate(q.heston.initial_variance)))

    cases = fd_greeks.bumped_cases(p, list(Greek))
    assert len(cases) == 1 + 2 * (2 * len(p.spots) + 2) and len({c.key for c in cases}) == len(cases)
    greeks = fd_greeks.flat(fd_greeks.differences({c.key: value(c.params) for c in cases}, p, list(Greek)))
    h = fd_greeks.SPOT_BUMP * 50.0
    # rel=1e-7: the differences cancel the cubic terms' 1e6 in float64, leaving about 1e-9 relative
    assert greeks["delta_1"] == pytest.approx(2 * 3 * 50.0**2 + 2 * h**2, rel=1e-7)  # central error of a cubic
    assert greeks["gamma_0"] == pytest.approx(6 * 100.0, rel=1e-7)
    assert greeks["vega_1"] == pytest.approx(3.0, rel=1e-7)
    assert greeks["rho"] == pytest.approx(7.0, rel=1e-7)
    assert greeks["theta"] == pytest.approx(6.0 * p.maturity, rel=1e-7)


def test_only_the_revaluations_asked_for_run() -> None:
    p = BasketOptionParams(**TWO, greeks=["rho"])
    assert [c.what for c in fd_greeks.bumped_cases(p, p.greeks)] == ["base", "rate", "rate"]


@pytest.mark.parametrize(("bad", "message"), [
    ({"greeks": ["delta", "delta"]}, "must not repeat"),
    ({"greeks": ["vanna"]}, "greeks"),
    ({"greeks": ["delta"], "paths": MAX_FD_GREEK_PATHS + 1}, "with greeks at most"),
])
def test_bad_greek_requests_are_rejected(bad: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        BasketOptionParams(**{**TWO, **bad})
    with pytest.raises(ValidationError, match=message):
        AmericanOptionParams(**{**TWO, **bad})


def test_echoed_params_with_greeks_parse_again() -> None:
    p = AmericanOptionParams(**TWO, greeks=["theta", "delta"], paths=1_000, regression_paths=1_000)
    assert AmericanOptionParams.model_validate(json.loads(json.dumps(p.model_dump(mode="json")))) == p
