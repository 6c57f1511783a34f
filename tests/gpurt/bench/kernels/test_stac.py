"""The STAC-A2-shaped benchmark: its revaluations, its Greeks arithmetic, its baseline, its CLI output."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from gpurt.bench.kernels import baselines, stac
from kernels.params import AmericanOptionParams
from tests.kernels.job_input import run_raw

TINY = {"paths": 4_000, "regression_paths": 4_000, "steps": 12, "exercise_dates": 12}
CASE = stac.case


def _tiny() -> AmericanOptionParams:
    return CASE(0.01).model_copy(update=TINY)


@pytest.mark.slow  # the STAC case and its baseline at enough paths to compare Greeks
def test_kernel_and_baseline_greeks_agree() -> None:
    """The bench's two sides compute the same estimator (one rule, the same bumps): different random
    numbers, so only the sign and size of the well-determined Greeks can be compared."""
    p = _tiny()
    kernel = stac.kernel_greeks("cpu")(p)
    baseline = stac.baseline_greeks(stac.array_module("cpu"))(p)
    assert set(kernel) == set(baseline) == {"price", "rho", "theta"} | {
        f"{g}_{i}" for g in ("delta", "gamma", "vega") for i in range(stac.ASSETS)}
    for i in range(stac.ASSETS):  # a put on an equally weighted basket: each delta about -0.1
        assert -0.3 < kernel[f"delta_{i}"] < 0 and -0.3 < baseline[f"delta_{i}"] < 0
    assert kernel["rho"] < 0 and baseline["rho"] < 0


def test_numpy_baseline_computes_the_same_estimator() -> None:
    p = _tiny()
    kernel = run_raw("american_option", p, device="cpu").summary
    baseline = baselines.basket_lsm_valuation(stac.array_module("cpu"))(p)
    # independent random numbers: the two estimates differ by about sqrt(2) standard errors
    assert abs(kernel["estimate"] - baseline) < 4 * math.sqrt(2) * kernel["std_error"]


@pytest.mark.slow  # the STAC case and its baseline at enough paths to compare Greeks
def test_bench_kernels_reports_the_stac_case(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpurt.bench.kernels import runner
    from gpurt.cli.app import app

    monkeypatch.setattr(stac, "case", lambda scale: _tiny())
    monkeypatch.setattr(runner, "cases", lambda device, scale: [])
    result = CliRunner().invoke(app, ["bench", "kernels", "--device", "cpu", "--json", "--no-warm-start"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)["stac"]
    assert figures["kernel_warm_s"] > 0 and figures["baseline_warm_s"] > 0
    assert figures["ratio"] == pytest.approx(figures["baseline_warm_s"] / figures["kernel_warm_s"])
    assert set(figures["greeks"]) >= {"delta_0", "gamma_4", "vega_2", "rho", "theta"}


def test_markdown_names_the_anchor_and_both_times() -> None:
    figures = stac.StacFigures("cpu", 25_000, 40.0, 30.0, 90.0, 60.0, 4.9, 4.95, {"rho": -1.0})
    text = stac.markdown(figures, "a test CPU", "2026-11-23", "load average 1.0")
    assert "NVDA221007" in text and "30.00 s" in text and "60.00 s" in text and "2.0x" in text
