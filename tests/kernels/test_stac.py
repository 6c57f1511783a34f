"""The STAC-A2-shaped benchmark: its revaluations, its Greeks arithmetic, its baseline, its CLI output."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from kernels import baselines, stac
from kernels.jobs import run_job
from kernels.params import AmericanOptionParams

TINY = {"paths": 4_000, "regression_paths": 4_000, "steps": 12, "exercise_dates": 12}
CASE = stac.case


def _tiny() -> AmericanOptionParams:
    return CASE(0.01).model_copy(update=TINY)


def test_every_greek_has_its_two_revaluations() -> None:
    p = stac.case(0.01)
    cases = stac.bumped_cases(p)
    assert len(cases) == 1 + 2 * (3 * stac.ASSETS - stac.ASSETS) + 4  # price, spot and vega per asset, rho, theta
    names = {(name, sign) for name, sign, _ in cases}
    assert len(names) == len(cases)
    spot_up = next(q for name, sign, q in cases if (name, sign) == ("spot2", 1))
    assert spot_up.spots[2] == pytest.approx(p.spots[2] * 1.01) and spot_up.spots[1] == p.spots[1]


def test_greeks_are_the_central_differences_of_a_known_function() -> None:
    """On a valuation with known derivatives, the Greeks come out exactly (up to the differences' own error)."""
    p = stac.case(0.01)

    def value(q: AmericanOptionParams) -> float:
        assert q.heston is not None
        return (sum((i + 1) * s * s for i, s in enumerate(q.spots)) + 7 * q.rate - 3 * q.maturity
                + sum(math.sqrt(v) for v in q.heston.initial_variance))

    greeks = stac.all_greeks(value, p)
    assert greeks["delta_1"] == pytest.approx(2 * 2 * p.spots[1], rel=1e-9)
    assert greeks["gamma_4"] == pytest.approx(2 * 5, rel=1e-6)
    assert greeks["vega_0"] == pytest.approx(1.0, rel=1e-6)
    assert greeks["rho"] == pytest.approx(7.0, rel=1e-6) and greeks["theta"] == pytest.approx(3.0, rel=1e-6)
    assert len(greeks) == 1 + 3 * stac.ASSETS + 2


def test_numpy_baseline_computes_the_same_estimator() -> None:
    p = _tiny()
    kernel = run_job("american_option", p, device="cpu").summary
    baseline = baselines.basket_lsm_valuation(stac.array_module("cpu"))(p)
    # independent random numbers: the two estimates differ by about sqrt(2) standard errors
    assert abs(kernel["estimate"] - baseline) < 4 * math.sqrt(2) * kernel["std_error"]


def test_bench_kernels_reports_the_stac_case(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernels import bench
    from runtime.cli.app import app

    monkeypatch.setattr(stac, "case", lambda scale: _tiny())
    monkeypatch.setattr(bench, "cases", lambda device, scale: [])
    result = CliRunner().invoke(app, ["bench", "kernels", "--device", "cpu", "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)["stac"]
    assert figures["kernel_warm_s"] > 0 and figures["baseline_warm_s"] > 0
    assert figures["ratio"] == pytest.approx(figures["baseline_warm_s"] / figures["kernel_warm_s"])
    assert set(figures["greeks"]) >= {"delta_0", "gamma_4", "vega_2", "rho", "theta"}


def test_markdown_names_the_anchor_and_both_times() -> None:
    figures = stac.StacFigures("cpu", 25_000, 40.0, 30.0, 90.0, 60.0, 4.9, 4.95, {"rho": -1.0})
    text = stac.markdown(figures, "a test CPU", "2026-11-23", "load average 1.0")
    assert "NVDA221007" in text and "30.00 s" in text and "60.00 s" in text and "2.0x" in text
