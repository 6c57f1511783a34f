"""Every result's picture, read back from its matplotlib Axes as a reader would read it.

The results come from real kernel runs on the CPU (``kernel_results``); what a figure must show is checked
against the results' own reported figures and, where one exists, against an independent formula in this file:
labels with units, numeric ticks, error bars from ``ci_low`` to ``ci_high``, the reference curve, and VaR and
CVaR at the reported values.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from gpurt.client import Result, plot_results
from runtime.protocol.messages import ErrorKind, JobError, JobResult, JobStatus, JobType
from tests.gpurt.client.kernel_results import (
    BASKET,
    PORTFOLIO,
    convergence,
    heston_book,
    kernel_result,
    var_by_horizon,
)

N = NormalDist()
STRIKES = (70.0, 80.0, 90.0, 100.0, 110.0, 120.0, 130.0)


# --- reading a figure ------------------------------------------------------------------------------------------


def new_axes() -> Axes:
    """An Axes of a figure outside pyplot, as the demo's report draws into."""
    return Figure().add_subplot()


def errorbars(ax: Axes) -> list[list[tuple[float, float, float, float]]]:
    """Each error-bar series as (x, y, bar start, bar end) per point, read from the drawn segments."""
    series = []
    for container in ax.containers:
        if not isinstance(container, ErrorbarContainer):
            continue
        data_line, _, (bars, *_) = container.lines
        vertical = container.has_yerr
        points = []
        for (x, y), ((x0, y0), (x1, y1)) in zip(data_line.get_xydata(), bars.get_segments(), strict=True):
            points.append((x, y, *sorted((y0, y1) if vertical else (x0, x1))))
        series.append(points)
    return series


def reference_lines(ax: Axes) -> list[Line2D]:
    """The dashed or dotted lines: references (the estimates are markers with error bars)."""
    return [line for line in ax.get_lines() if line.get_linestyle() in {"--", ":"}]


def assert_readable(ax: Axes, x_unit: str, y_unit: str) -> None:
    """Labels that carry their unit, and at least two numeric ticks inside each axis' limits."""
    assert x_unit in ax.get_xlabel() and y_unit in ax.get_ylabel(), (ax.get_xlabel(), ax.get_ylabel())
    for ticks, (low, high) in ((ax.get_xticks(), ax.get_xlim()), (ax.get_yticks(), ax.get_ylim())):
        inside = [t for t in ticks if min(low, high) <= t <= max(low, high)]
        assert len(inside) >= 2 and all(math.isfinite(t) for t in inside), (ticks, low, high)
    assert ax.get_title()


def level(line: Line2D) -> float:
    """The value of a horizontal line."""
    (value,) = set(line.get_ydata())
    return float(value)


def legend(ax: Axes) -> list[str]:
    found = ax.get_legend()
    return [text.get_text() for text in found.get_texts()] if found is not None else []


# --- independent formulas --------------------------------------------------------------------------------------


def black_scholes(spot: float, strike: float, rate: float, q: float, vol: float, t: float, call: bool) -> float:
    d1 = (math.log(spot / strike) + (rate - q + vol * vol / 2) * t) / (vol * math.sqrt(t))
    d2 = d1 - vol * math.sqrt(t)
    if call:
        return spot * math.exp(-q * t) * N.cdf(d1) - strike * math.exp(-rate * t) * N.cdf(d2)
    return strike * math.exp(-rate * t) * N.cdf(-d2) - spot * math.exp(-q * t) * N.cdf(-d1)


def vega_by_difference(spot: float, strike: float, rate: float, q: float, vol: float, t: float) -> float:
    h = 1e-5
    return (black_scholes(spot, strike, rate, q, vol + h, t, True)
            - black_scholes(spot, strike, rate, q, vol - h, t, True)) / (2 * h)


# --- results ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("store")


@pytest.fixture(scope="module")
def european(store: Path) -> Result:
    return kernel_result(store, "call", "european_option", {"strike": 100.0, "paths": 20_000,
                                                            "greeks": ["delta", "vega"]})


@pytest.fixture(scope="module")
def book(store: Path) -> Result:
    return heston_book(store, 20_000, STRIKES)


@pytest.fixture(scope="module")
def var_results(store: Path) -> list[Result]:
    return var_by_horizon(store, 20_000)


@pytest.fixture(autouse=True)
def _close_pyplot_figures() -> Iterator[None]:
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


# --- one price -------------------------------------------------------------------------------------------------


def test_a_price_shows_its_interval_at_its_paths_and_the_closed_form(european: Result) -> None:
    ax = european.plot(new_axes())

    ((point,),) = errorbars(ax)
    assert point == pytest.approx((20_000, european.estimate, *european.interval), rel=1e-12)
    (reference,) = reference_lines(ax)
    assert level(reference) == pytest.approx(black_scholes(100, 100, 0.05, 0, 0.2, 1.0, True), rel=1e-9)
    assert_readable(ax, "paths", "price, in the spot's currency")
    assert ax.get_xscale() == "log"
    title = ax.get_title()
    assert "European call K=100, T=1y" in title and "Black-Scholes: spot 100, volatility 20%" in title
    assert legend(ax)[0].startswith("Black-Scholes closed form") and "99% interval" in legend(ax)[1]


@pytest.mark.parametrize(("job_type", "params", "reference"), [
    ("heston_option", {"paths": 2_000, "steps": 16}, "semi_analytic"),
    ("american_option", {"spots": [100.0], "weights": [1.0], "volatilities": [0.25], "kind": "put", "steps": 10,
                         "paths": 2_000, "regression_paths": 2_000}, "binomial_reference"),
    ("asian_option", {"paths": 2_000, "steps": 12}, None),
    ("basket_option", {**BASKET, "paths": 2_000}, None),
])
def test_each_option_type_draws_the_reference_its_kernel_computed(store: Path, job_type: str, params: dict[str, Any],
                                                                  reference: str | None) -> None:
    result = kernel_result(store, job_type, job_type, params)

    ax = result.plot(new_axes())

    ((point,),) = errorbars(ax)
    assert point[2:] == pytest.approx(result.interval, rel=1e-12)
    drawn = [level(line) for line in reference_lines(ax)]
    assert drawn == ([pytest.approx(result[reference], rel=1e-12)] if reference else [])  # nothing without one
    assert_readable(ax, "paths", "price")


def test_a_random_walk_says_its_unit() -> None:
    raw = JobResult(job_id="walk", status=JobStatus.SUCCEEDED, type=JobType.RANDOM_WALK, result={
        "estimate": 0.002, "std_error": 0.01, "ci_low": -0.024, "ci_high": 0.028, "confidence": 0.99, "paths": 1_000,
        "params": {"paths": 1_000, "steps": 10, "seed": 42}})
    ax = Result(raw).plot(new_axes())
    assert_readable(ax, "paths", "standard normal units")


def test_a_title_reads_the_typed_params_defaults_included() -> None:
    """An echo that leaves a parameter at its default out still titles the picture: the title reads the result's
    typed job (``Result.job``), where the default is filled in, not the echoed JSON (which raised KeyError)."""
    raw = JobResult(job_id="walk", status=JobStatus.SUCCEEDED, type=JobType.RANDOM_WALK, result={
        "estimate": 0.002, "std_error": 0.01, "ci_low": -0.024, "ci_high": 0.028, "confidence": 0.99, "paths": 1_000,
        "params": {"paths": 1_000}})
    ax = Result(raw).plot(new_axes())
    assert "random walk of 1,000 standard normal steps, 1,000 paths" in ax.get_title()


def test_many_runs_of_one_option_show_it_converging(store: Path) -> None:
    runs = convergence(store, (16_000, 1_000, 4_000))

    ax = plot_results(runs, new_axes())

    (points,) = errorbars(ax)
    ordered = sorted(runs, key=lambda r: r["paths"])
    assert points == [pytest.approx((r["paths"], r.estimate, *r.interval), rel=1e-12) for r in ordered]
    widths = [high - low for *_, low, high in points]
    assert widths == sorted(widths, reverse=True)  # the interval narrows as paths grow
    (reference,) = reference_lines(ax)
    assert level(reference) == pytest.approx(black_scholes(100, 100, 0.05, 0, 0.2, 1.0, True), rel=1e-9)
    assert_readable(ax, "paths", "price")


# --- a book: smile and prices ----------------------------------------------------------------------------------


def test_a_heston_books_smile_has_vega_mapped_error_bars_and_the_semi_analytic_smile(book: Result) -> None:
    ax = book.plot(new_axes())

    (points,) = errorbars(ax)
    contracts = sorted(book.contracts, key=lambda c: c["strike"])
    assert [p[0] for p in points] == list(STRIKES)
    for (strike, vol, low, high), contract in zip(points, contracts, strict=True):
        call = contract["kind"] == "call"
        # the drawn volatility reprices the Monte Carlo estimate ...
        assert black_scholes(100, strike, 0.03, 0.01, vol, 1.0, call) == pytest.approx(contract["estimate"], rel=1e-7)
        # ... and its bar is the price's reported interval divided by vega
        vega = vega_by_difference(100, strike, 0.03, 0.01, vol, 1.0)
        assert vol - low == pytest.approx((contract["estimate"] - contract["ci_low"]) / vega, rel=1e-4)
        assert high - vol == pytest.approx((contract["ci_high"] - contract["estimate"]) / vega, rel=1e-4)
    (reference,) = reference_lines(ax)
    assert list(reference.get_xdata()) == list(STRIKES)
    for strike, vol, contract in zip(STRIKES, reference.get_ydata(), contracts, strict=True):
        assert black_scholes(100, strike, 0.03, 0.01, vol, 1.0, contract["kind"] == "call") == \
            pytest.approx(contract["reference"], rel=1e-7)
    assert list(reference.get_ydata()) == sorted(reference.get_ydata(), reverse=True)  # correlation < 0: a skew
    assert_readable(ax, "strike", "implied volatility, %")
    assert "Heston" in ax.get_title() and "correlation -0.7" in ax.get_title()
    assert any("semi-analytic Heston" in text for text in legend(ax))


def test_a_black_scholes_books_implied_vols_recover_its_volatility(store: Path) -> None:
    result = kernel_result(store, "bs-book", "option_book", {
        "volatility": 0.2, "paths": 20_000, "contracts": [{"strike": k, "maturity": 0.5} for k in (90, 100, 110)]})

    frame = result.implied_vols()

    assert list(frame["strike"]) == [90, 100, 110]
    np.testing.assert_allclose(frame["reference_implied_vol"], 0.2, rtol=1e-8)  # Black-Scholes prices: 20% exactly
    assert (abs(frame["implied_vol"] - 0.2) < 5 * frame["implied_vol_std_error"]).all()
    assert (frame["implied_vol_ci_low"] < frame["implied_vol"]).all()
    assert (frame["implied_vol"] < frame["implied_vol_ci_high"]).all()


def test_a_books_prices_by_strike_show_each_contracts_interval_and_reference(book: Result) -> None:
    ax = book.plot(new_axes(), kind="prices")

    by_strike = {c["strike"]: c for c in book.contracts}
    drawn = [point for series in errorbars(ax) for point in series]
    assert sorted(p[0] for p in drawn) == list(STRIKES)
    for strike, estimate, low, high in drawn:
        contract = by_strike[strike]
        assert (estimate, low, high) == pytest.approx((contract["estimate"], contract["ci_low"], contract["ci_high"]),
                                                      rel=1e-12)
    references = {x: y for line in reference_lines(ax) for x, y in zip(line.get_xdata(), line.get_ydata(),
                                                                       strict=True)}
    assert references == {k: pytest.approx(c["reference"], rel=1e-12) for k, c in by_strike.items()}
    assert_readable(ax, "strike", "price")


def test_option_jobs_of_several_strikes_plot_as_prices_by_strike(store: Path) -> None:
    strip = [kernel_result(store, f"call-{k}", "european_option", {"strike": k, "paths": 4_000}) for k in (90, 110)]

    ax = plot_results(strip, new_axes())

    (points,) = errorbars(ax)
    assert [p[0] for p in points] == [90, 110]
    (reference,) = reference_lines(ax)
    assert list(reference.get_ydata()) == pytest.approx(
        [black_scholes(100, k, 0.05, 0, 0.2, 1.0, True) for k in (90, 110)], rel=1e-9)


# --- Greeks ----------------------------------------------------------------------------------------------------


def test_a_baskets_greeks_are_drawn_per_asset_with_their_intervals(store: Path) -> None:
    basket = kernel_result(store, "basket", "basket_option", {**BASKET, "paths": 4_000,
                                                              "greeks": ["delta", "vega", "rho"]})
    figure = Figure(figsize=(14, 4))

    axes = basket.plot(figure.subplots(1, 3), kind="greeks")

    delta, vega, rho = axes
    for ax, name in ((delta, "delta"), (vega, "vega")):
        ((*points,),) = errorbars(ax)
        entries = basket.summary["greeks"][name]
        assert points == [pytest.approx((i, e["estimate"], e["ci_low"], e["ci_high"]), rel=1e-12)
                          for i, e in enumerate(entries)]
        assert_readable(ax, "asset", name)
    assert "per unit of spot" in delta.get_ylabel() and "per 1.00 of volatility" in vega.get_ylabel()
    ((point,),) = errorbars(rho)
    greek = basket.summary["greeks"]["rho"]
    assert point == pytest.approx((100.0, greek["estimate"], greek["ci_low"], greek["ci_high"]), rel=1e-12)
    assert "per 1.00 of rate" in rho.get_ylabel() and "finite difference" in rho.get_title()
    assert "3 asset(s), spots [100, 95, 105]" in figure.get_suptitle()


def test_a_books_greeks_are_drawn_per_contract(book: Result) -> None:
    (ax,) = book.plot(new_axes(), kind="greeks", greeks=["vega"])

    drawn = {p[0]: p[1:] for series in errorbars(ax) for p in series}
    assert drawn == {c["strike"]: pytest.approx((c["greeks"]["vega"]["estimate"], c["greeks"]["vega"]["ci_low"],
                                                 c["greeks"]["vega"]["ci_high"]), rel=1e-12) for c in book.contracts}
    assert_readable(ax, "strike", "vega, price per 1.00 of volatility")


def test_without_pyplot_axes_a_figure_is_made_one_panel_per_greek(european: Result) -> None:
    axes = european.plot(kind="greeks")
    assert [ax.get_title().split("\n")[0] for ax in axes] == ["delta", "vega"]
    assert axes[0].figure is axes[1].figure


# --- VaR and CVaR ----------------------------------------------------------------------------------------------


def test_the_loss_distribution_marks_var_and_cvar_at_the_reported_values(var_results: list[Result]) -> None:
    ten_days = var_results[-1]
    s = ten_days.summary

    ax = ten_days.plot(new_axes())

    verticals = {line.get_label().split(" =")[0]: line.get_xdata()[0] for line in ax.get_lines()
                 if len(set(line.get_xdata())) == 1 and not line.get_label().startswith("_")}
    assert verticals == {"VaR 99%": s["var"], "CVaR 99%": s["cvar"], "delta-normal VaR 99%": s["delta_normal_var"]}
    assert s["var"] == pytest.approx(ten_days.loss_quantiles()[990], rel=1e-12)  # the distribution's 99% quantile
    intervals = {round(point[0], 6): point[2:] for series in errorbars(ax) for point in series}
    assert intervals == {round(s["var"], 6): pytest.approx(s["var_ci"], rel=1e-12),
                         round(s["cvar"], 6): pytest.approx(s["cvar_ci"], rel=1e-12)}
    bars = ax.patches
    assert sum(bar.get_height() for bar in bars) == 20_000  # every scenario once
    tail = [bar for bar in bars if bar.get_x() >= s["var"]]
    assert tail and all(bar.get_facecolor() != bars[0].get_facecolor() for bar in tail)  # the tail is shaded
    assert_readable(ax, "loss over 10 trading days, in the exposures' currency", "scenarios per bin")
    assert "at 99%" in ax.get_title() and "3 positions, 10M gross" in ax.get_title()
    assert any(label.get_text().endswith(("M", "k")) for label in ax.get_xticklabels())  # money, not 1e6


def test_var_by_horizon_shows_intervals_and_the_delta_normal_curves(var_results: list[Result]) -> None:
    ax = plot_results(var_results, new_axes())

    var, cvar = errorbars(ax)
    for drawn, key in ((var, "var"), (cvar, "cvar")):
        assert drawn == [pytest.approx((r["horizon_trading_days"], r[key], *r[f"{key}_ci"]), rel=1e-12)
                         for r in var_results]
    # the delta-normal figures from the portfolio itself: sigma = sqrt(e' C e), VaR = z sigma sqrt(h / 252)
    exposure = np.asarray(PORTFOLIO["exposures"]) * np.asarray(PORTFOLIO["volatilities"])
    sigma = math.sqrt(exposure @ np.asarray(PORTFOLIO["correlation"]) @ exposure)
    z = N.inv_cdf(0.99)
    expected = {"delta-normal VaR (closed form)": [z * sigma * math.sqrt(h / 252) for h in (1, 5, 10)],
                "delta-normal CVaR (closed form)": [N.pdf(z) / 0.01 * sigma * math.sqrt(h / 252) for h in (1, 5, 10)]}
    assert {line.get_label(): list(line.get_ydata()) for line in reference_lines(ax)} == \
        {label: pytest.approx(values, rel=1e-9) for label, values in expected.items()}
    assert_readable(ax, "horizon, trading days", "loss, in the exposures' currency")
    assert "VaR and CVaR at 99% by horizon" in ax.get_title()


# --- nothing drawn without data --------------------------------------------------------------------------------


def test_nothing_is_drawn_without_data(european: Result, store: Path) -> None:
    failed = Result(JobResult(job_id="bad", status=JobStatus.FAILED, type=JobType.EUROPEAN_OPTION,
                              error=JobError(kind=ErrorKind.PERMANENT, message="simulated permanent failure")))
    with pytest.raises(ValueError, match="bad failed: simulated permanent failure"):
        failed.plot(new_axes())
    with pytest.raises(ValueError, match="no succeeded result"):
        plot_results([failed])
    asian = kernel_result(store, "asian", "asian_option", {"paths": 2_000, "steps": 12})
    with pytest.raises(ValueError, match="implied volatility"):
        asian.plot(new_axes(), kind="smile")
    with pytest.raises(ValueError, match="computed the Greeks none"):
        asian.plot(new_axes(), kind="greeks")
    with pytest.raises(ValueError, match="2 Greeks to draw need 2 Axes"):
        european.plot(new_axes(), kind="greeks")
    with pytest.raises(ValueError, match="kind 'pie'"):
        european.plot(new_axes(), kind="pie")


def test_importing_the_client_imports_no_plotting_library() -> None:
    probe = ("import json, sys, gpurt, gpurt.client; gpurt.Result; gpurt.plot_results; "
             "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'scipy'))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout) == []
