"""Pictures of results that a risk desk reads: ``result.plot()`` and ``plot_results(results)``.

``Result.plot()`` draws with ``plot_result``, and ``gpurt.client.plot_results`` (which also takes futures and
protocol results, made into ``Result`` objects in ``gpurt.client.results``) with ``plot_many``. Both take
results as the ``ResultView`` they read (``gpurt.client.result_view``): this module never imports ``results``.

Every figure states what it shows in numbers: axes with units and numeric ticks, a title naming the model and
its parameters, intervals drawn exactly as the job reported them (an error bar runs from ``ci_low`` to
``ci_high``, at the confidence the legend states), and the closed-form or semi-analytic reference wherever the
kernel computed one. Nothing is drawn without data: asking for a picture a result cannot give (a failed job, the
Greeks of a job that computed none) raises ``ValueError`` saying why.

matplotlib is imported inside the functions, so ``import gpurt`` stays light and any backend works (Agg
headless). With ``ax`` left out a new figure is made with pyplot, as pandas does, so Jupyter shows it; with
``ax`` given the picture is drawn there (the demo's report draws into figures it renders itself); only the
Greeks, drawn on several Axes, also title the figure.
"""

from __future__ import annotations

import itertools
import math
import textwrap
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from gpurt.client.options import REFERENCES, PricedOption, priced_options
from gpurt.client.result_view import ResultView
from gpurt.client.volatility import smile_points
from kernels.descriptors import DESCRIPTORS, PRICE_UNIT, money
from runtime.protocol.messages import JobStatus

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.axes import Axes

# What the Greeks are derivatives of, per unit (docs/kernels.md: theta is -dV/dT per year, vega per unit of
# volatility, rho per unit of rate).
GREEK_UNITS: Final = {
    "delta": "price per unit of spot",
    "gamma": "price per unit of spot²",
    "vega": "price per 1.00 of volatility",
    "rho": "price per 1.00 of rate",
    "theta": "price per year, -dV/dT",
}
STRIKE_LABEL: Final = "strike, in the spot's currency"
SIZE_IN: Final = (8.0, 4.5)
GREEK_PANEL_IN: Final = (4.8, 4.0)
# Characters per title line: a figure SIZE_IN wide at font size 10, and a Greek's panel at 9.
TITLE_WRAP: Final = 100
GREEK_WRAP: Final = 55
ESTIMATE_COLOUR: Final = "#1f4e79"
REFERENCE_COLOUR: Final = "#c0392b"
TAIL_COLOUR: Final = "#c0392b"
BODY_COLOUR: Final = "#5b8db8"
GROUP_COLOURS: Final = ("#1f4e79", "#c0392b", "#2e8b57", "#8e44ad", "#d68910", "#555555")
# A VaR title leaves the horizon out where the picture's axis shows it.
HORIZON: Final = frozenset({"horizon_days"})
# Parameters that change how an option is estimated, not which option it is: results that differ only in
# these price the same option, and together show the estimate converging.
ESTIMATOR_PARAMS: Final = frozenset({"paths", "seed", "regression_paths", "antithetic", "control_variate",
                                     "greeks", "confidence"})


# --- entry points ----------------------------------------------------------------------------------------------


def plot_result(result: ResultView, ax: Axes | Sequence[Axes] | None = None, *, kind: str | None = None,
                **options: Any) -> Axes | np.ndarray:
    """Draw one result (``Result.plot``): its estimate, smile, Greeks or loss distribution; returns the Axes.

    ``kind`` defaults by job type: a book's smile (``"smile"``), a VaR job's loss distribution (``"loss"``),
    any other job's estimate with its interval and reference (``"estimate"``). ``"prices"`` draws a book's
    prices by strike; ``"greeks"`` the Greeks, one panel per Greek (an array of Axes, as pandas' ``subplots``;
    ``greeks=["delta"]`` picks some). ``options`` go to the function that draws ``kind``.
    """
    if result.status is not JobStatus.SUCCEEDED:
        why = f": {result.raw.error.message}" if result.raw.error is not None else ""
        raise ValueError(f"job {result.job_id} {result.status.value}{why}; there is nothing to plot")
    descriptor = DESCRIPTORS.get(_job_type(result))
    chosen = kind or (descriptor.plot if descriptor is not None else "estimate")
    if chosen not in SINGLE_KINDS:
        raise ValueError(f"kind {chosen!r} is not one of {sorted(SINGLE_KINDS)}")
    return SINGLE_KINDS[chosen](result, ax, **options)


def plot_many(items: Iterable[ResultView], ax: Axes | None = None, *, kind: str | None = None) -> Axes:
    """Draw many results in one picture (``gpurt.client.plot_results``, which lists the kinds);
    returns the Axes. Jobs that did not succeed are left out; if none succeeded, ``ValueError``."""
    results = [r for r in items if r.status is JobStatus.SUCCEEDED]
    if not results:
        raise ValueError("no succeeded result to plot")
    if kind is None and len(results) == 1:
        return plot_result(results[0], ax)  # type: ignore[return-value]  # a default kind draws one Axes
    chosen = kind or _many_kind(results)
    if chosen not in MANY_KINDS:
        raise ValueError(f"kind {chosen!r} is not one of {sorted(MANY_KINDS)}")
    return MANY_KINDS[chosen](results, ax)


def _many_kind(results: list[ResultView]) -> str:
    types = {_job_type(r) for r in results}
    own = {getattr(DESCRIPTORS.get(job_type), "plot_many", None) for job_type in types}
    if len(own) == 1 and None not in own:
        return own.pop()
    if len(results) > 1 and _one_option(results):
        return "convergence"
    if priced_options(results):
        return "prices"
    raise ValueError(f"no picture combines these results ({', '.join(sorted(types))}): plot them one by one")


# --- an estimate and its convergence ---------------------------------------------------------------------------


def plot_estimate(result: ResultView, ax: Axes | None = None) -> Axes:
    """One job's estimate with its interval at its path count, beside the reference where the kernel had one."""
    if result.estimate is None:
        raise ValueError(f"job {result.job_id} ({_job_type(result)}) reports no single estimate to plot")
    return plot_convergence([result], ax)


def plot_convergence(results: Sequence[ResultView], ax: Axes | None = None) -> Axes:
    """Estimate and interval against paths (log scale) for results pricing one option; the reference as a line."""
    if not _one_option(results):
        raise ValueError("a convergence plot needs results of one job type whose parameters differ only in "
                         f"how they estimate ({', '.join(sorted(ESTIMATOR_PARAMS))})")
    ordered = sorted(results, key=_paths)
    ax = ax or _new_axes()
    paths = [_paths(r) for r in ordered]
    _errorbars(ax, paths, [r.summary for r in ordered], f"Monte Carlo estimate, {_level(ordered)} interval")
    key = next((k for k in REFERENCES if ordered[0].summary.get(k) is not None), None)
    if key is not None:
        value = ordered[0].summary[key]
        ax.axhline(value, color=REFERENCE_COLOUR, linestyle="--", label=f"{REFERENCES[key]} {value:.6g}")
    ax.set_xscale("log")
    # whole decades either side, so the log axis always has labelled ticks, even for one point
    ax.set_xlim(10 ** math.floor(math.log10(paths[0] / 1.5)), 10 ** math.ceil(math.log10(paths[-1] * 1.5)))
    _thousands(ax.xaxis)
    ax.set_xlabel("Monte Carlo paths (log scale)")
    ax.set_ylabel(_estimate_unit(ordered[0]))
    last = ordered[-1]
    low, high = last.interval or (last.estimate, last.estimate)
    error = last.std_error or 0.0
    _title(ax, f"{_describe(last)}\nestimate {_figure(last.estimate, error)} [{_figure(low, error)}, "
               f"{_figure(high, error)}] at {_paths(last):,} paths")
    ax.legend(fontsize=8)
    return ax


# --- options by strike: prices and smile -----------------------------------------------------------------------


def plot_prices(results: ResultView | Sequence[ResultView], ax: Axes | None = None) -> Axes:
    """Option prices by strike with their intervals, one series per maturity and kind; references as curves."""
    options = _options(results)
    ax = ax or _new_axes()
    for (maturity, kind), group, (colour, reference) in _groups(options, lambda o: (o.maturity, o.kind),
                                                                lambda o: o.strike):
        strikes = [o.strike for o in group]
        label = f"T = {maturity:g}y {kind}s"
        _errorbars(ax, strikes, [vars(o) for o in group], f"{label}, Monte Carlo, {_level(group)} interval",
                   colour=colour)
        _reference_curve(ax, [(o.strike, o.reference) for o in group], f"{label}, {group[0].reference_name}",
                         colour=reference)
    _thousands(ax.xaxis)
    ax.set_xlabel(STRIKE_LABEL)
    ax.set_ylabel(PRICE_UNIT)
    _title(ax, f"Prices by strike: {_describe_options(results, options)}")
    ax.legend(fontsize=8)
    return ax


def plot_smile(results: ResultView | Sequence[ResultView], ax: Axes | None = None) -> Axes:
    """Black-Scholes implied volatility by strike, one smile per maturity: Monte Carlo points with intervals
    (the price's interval divided by vega) and the reference prices' smile as a curve."""
    from matplotlib.ticker import PercentFormatter

    points = [p for p in smile_points(_options(results)) if p.implied_vol is not None]
    if not points:
        raise ValueError("no option here has a Black-Scholes implied volatility (Europeans on one underlying "
                         "whose price lies inside the no-arbitrage bounds)")
    ax = ax or _new_axes()
    for maturity, group, (colour, reference) in _groups(points, lambda p: p.option.maturity,
                                                        lambda p: p.option.strike):
        strikes = [p.option.strike for p in group]
        label = f"T = {maturity:g}y"
        _errorbars(ax, strikes, [{"estimate": p.implied_vol, "ci_low": p.ci_low, "ci_high": p.ci_high}
                                 for p in group],
                   f"{label}, Monte Carlo, {_level([p.option for p in group])} interval (price interval / vega)",
                   colour=colour)
        _reference_curve(ax, [(p.option.strike, p.reference) for p in group],
                         f"{label}, {group[0].option.reference_name}", colour=reference)
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    _thousands(ax.xaxis)
    ax.set_xlabel(STRIKE_LABEL)
    ax.set_ylabel("Black-Scholes implied volatility, % a year")
    _title(ax, f"Implied volatility smile: {_describe_options(results, [p.option for p in points])}")
    ax.legend(fontsize=8)
    return ax


# --- Greeks ----------------------------------------------------------------------------------------------------


def plot_greeks(result: ResultView, ax: Axes | Sequence[Axes] | None = None, *,
                greeks: Sequence[str] | None = None) -> np.ndarray:
    """The Greeks with their intervals, one panel per Greek: per contract of a book (by strike), per asset of a
    basket (by asset), or the one option's (at its strike). Returns the panels' Axes as an array.

    ``greeks`` picks which (default: every Greek the job computed); ``ax`` is one Axes per Greek drawn.
    """
    import numpy as np

    options = priced_options([result])
    computed = list(dict.fromkeys(name for o in options for name in o.greeks))
    names = list(greeks) if greeks is not None else computed
    missing = [name for name in names if name not in computed]
    if not names or missing:
        raise ValueError(f"job {result.job_id} computed the Greeks {computed or 'none'}; asked for {names}")
    axes = _greek_axes(ax, len(names))
    for panel, name in zip(axes, names, strict=True):
        _greek_panel(panel, name, options)
    axes[0].figure.suptitle(_wrap(f"Greeks: {_describe(result)}", GREEK_WRAP * len(names)), fontsize=10)
    return np.asarray(axes, dtype=object)


def _greek_axes(ax: Axes | Sequence[Axes] | None, count: int) -> list[Axes]:
    if ax is None:
        import matplotlib.pyplot as plt

        width, height = GREEK_PANEL_IN
        _, grid = plt.subplots(1, count, figsize=(width * count, height), squeeze=False, layout="constrained")
        return list(grid[0])
    from matplotlib.axes import Axes

    given = [ax] if isinstance(ax, Axes) else list(ax)
    if len(given) != count:
        raise ValueError(f"{count} Greeks to draw need {count} Axes, got {len(given)}")
    return given


def _greek_panel(ax: Axes, name: str, options: list[PricedOption]) -> None:
    with_greek = [o for o in options if name in o.greeks]
    per_asset = isinstance(with_greek[0].greeks[name], list)
    drawn: list[dict[str, Any]] = []
    if per_asset:  # a basket's: one entry per asset, in the order of spots
        drawn = with_greek[0].greeks[name]
        _errorbars(ax, list(range(len(drawn))), drawn, f"{_level_of(e.get('confidence') for e in drawn)} interval")
        ax.set_xticks(range(len(drawn)))
        ax.set_xlabel("asset (its index in spots)")
    else:
        for (maturity, kind), group, (colour, _) in _groups(with_greek, lambda o: (o.maturity, o.kind),
                                                            lambda o: o.strike):
            entries = [o.greeks[name] for o in group]
            _errorbars(ax, [o.strike for o in group], entries,
                       f"T = {maturity:g}y {kind}s, {_level_of(e.get('confidence') for e in entries)} interval",
                       colour=colour)
            drawn += entries
        _thousands(ax.xaxis)
        ax.set_xlabel(STRIKE_LABEL)
    ax.set_ylabel(f"{name}, {GREEK_UNITS.get(name, 'per unit of its input')}", fontsize=9)
    methods = "; ".join(dict.fromkeys(str(e.get("method", "")) for e in drawn))
    ax.set_title(f"{name}\n{_wrap(methods, GREEK_WRAP)}", fontsize=9)
    ax.legend(fontsize=7)


# --- VaR and CVaR ----------------------------------------------------------------------------------------------


def plot_loss(result: ResultView, ax: Axes | None = None) -> Axes:
    """A VaR job's loss distribution on a money axis: the tail beyond VaR shaded, VaR and CVaR marked with their
    intervals, the delta-normal VaR beside them, the confidence level in the title and legend."""
    from matplotlib.ticker import FuncFormatter

    s = result.summary
    histogram = result.loss_histogram()
    edges = [*histogram["bin_low"], histogram["bin_high"].iloc[-1]]
    counts = list(histogram["count"])
    var, cvar, level = s["var"], s["cvar"], f"{s['var_confidence'] * 100:g}%"
    ax = ax or _new_axes()
    lows = edges[:-1]
    colours = [TAIL_COLOUR if low >= var else BODY_COLOUR for low in lows]
    ax.bar(lows, counts, width=[b - a for a, b in zip(lows, edges[1:], strict=True)], align="edge",
           color=colours, linewidth=0)
    top = max(counts)
    for name, value, interval, style, height in (("VaR", var, s["var_ci"], "--", 0.92),
                                                 ("CVaR", cvar, s["cvar_ci"], "-", 0.8)):
        low, high = interval
        ax.axvline(value, color=REFERENCE_COLOUR, linestyle=style,
                   label=f"{name} {level} = {money(value)}, {_level([result])} interval "
                         f"[{money(low)}, {money(high)}]")
        ax.errorbar([value], [top * height], xerr=[[value - low], [high - value]], fmt="o", markersize=3,
                    color=REFERENCE_COLOUR, capsize=4)
    if s.get("delta_normal_var") is not None:
        ax.axvline(s["delta_normal_var"], color="#555555", linestyle=":",
                   label=f"delta-normal VaR {level} = {money(s['delta_normal_var'])} (closed form)")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: money(v)))
    ax.set_xlabel(f"loss over {s['horizon_trading_days']:g} trading days, in the exposures' currency "
                  "(gains negative)")
    ax.set_ylabel(f"scenarios per bin (bins {money(edges[1] - edges[0])} wide)")
    _title(ax, f"VaR and CVaR at {level}: {_describe(result)}")
    ax.legend(fontsize=8, loc="upper left")
    return ax


def plot_var(results: Sequence[ResultView], ax: Axes | None = None) -> Axes:
    """VaR and CVaR with their intervals by horizon (trading days), the delta-normal figures as reference curves."""
    from matplotlib.ticker import FuncFormatter

    if {_job_type(r) for r in results} != {"portfolio_var"}:
        raise ValueError("a VaR plot takes portfolio_var results only")
    ordered = sorted(results, key=lambda r: r["horizon_trading_days"])
    horizons = [r["horizon_trading_days"] for r in ordered]
    level = _level_of(r["var_confidence"] for r in ordered)
    ax = ax or _new_axes()
    for key, name, colour in (("var", "VaR", ESTIMATE_COLOUR), ("cvar", "CVaR", REFERENCE_COLOUR)):
        figures = [{"estimate": r[key], "ci_low": r[f"{key}_ci"][0], "ci_high": r[f"{key}_ci"][1]} for r in ordered]
        _errorbars(ax, horizons, figures, f"{name} {level}, Monte Carlo, {_level(ordered)} interval", colour=colour)
        _reference_curve(ax, [(h, r.summary.get(f"delta_normal_{key}")) for h, r in zip(horizons, ordered,
                                                                                      strict=True)],
                         f"delta-normal {name} (closed form)", colour=colour)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: money(v)))
    ax.set_xlabel("horizon, trading days")
    ax.set_ylabel("loss, in the exposures' currency")
    ax.set_xticks(horizons)
    _title(ax, f"VaR and CVaR at {level} by horizon: {_describe(ordered[0], HORIZON)}")
    ax.legend(fontsize=8)
    return ax


# The pictures one result can give, and many results. Which one is drawn when no kind is asked for is the job
# type's (its descriptor's ``plot`` and ``plot_many``, kernels.descriptors).
SINGLE_KINDS: Final[dict[str, Callable[..., Any]]] = {
    "estimate": plot_estimate, "prices": plot_prices, "smile": plot_smile, "greeks": plot_greeks, "loss": plot_loss}
MANY_KINDS: Final[dict[str, Callable[..., Any]]] = {
    "convergence": plot_convergence, "prices": plot_prices, "smile": plot_smile, "var": plot_var}


# --- drawing helpers -------------------------------------------------------------------------------------------


def _new_axes() -> Axes:
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=SIZE_IN, layout="constrained")
    return ax


def _errorbars(ax: Axes, x: Sequence[float], figures: Sequence[Any], label: str,
               colour: str = ESTIMATE_COLOUR) -> None:
    """Points at ``estimate`` with bars from ``ci_low`` to ``ci_high``: the intervals as reported, which need not
    be symmetric (a VaR's is not)."""
    estimates = [f["estimate"] for f in figures]
    below = [e - f["ci_low"] for e, f in zip(estimates, figures, strict=True)]
    above = [f["ci_high"] - e for e, f in zip(estimates, figures, strict=True)]
    ax.errorbar(x, estimates, yerr=[below, above], fmt="o", color=colour, ecolor=colour, capsize=3, markersize=4,
                label=label)


def _reference_curve(ax: Axes, points: Sequence[tuple[float, float | None]], label: str,
                     colour: str = REFERENCE_COLOUR) -> None:
    """The reference values as a dashed curve, where there are any."""
    known = [(x, y) for x, y in points if y is not None]
    if known:
        ax.plot([x for x, _ in known], [y for _, y in known], color=colour, linestyle="--", marker=".",
                label=label)


def _wrap(text: str, width: int) -> str:
    """Each line of ``text`` wrapped at ``width`` characters: a title must not run off the figure."""
    return "\n".join(textwrap.fill(line, width) for line in text.splitlines())


def _title(ax: Axes, text: str) -> None:
    ax.set_title(_wrap(text, TITLE_WRAP), fontsize=10)


def _figure(value: float, error: float) -> str:
    """``value`` to the decimals its standard error supports (two significant digits of the error)."""
    decimals = max(0, 1 - math.floor(math.log10(error))) if error > 0 else 6
    return f"{value:,.{decimals}f}"


def _thousands(axis: Any) -> None:
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.6g}"))


def _level_of(confidences: Iterable[float | None]) -> str:
    found = sorted({c for c in confidences if c is not None})
    return "/".join(f"{c * 100:g}%" for c in found) or "reported"


def _level(items: Sequence[Any]) -> str:
    """The confidence of the intervals, e.g. ``99%``."""
    return _level_of(getattr(i, "confidence", None) for i in items)


def _groups(items: Iterable[Any], key: Callable[[Any], Any],
            strike: Callable[[Any], float]) -> list[tuple[Any, list[Any], tuple[str, str]]]:
    """``items`` grouped by ``key``, groups in key order, each sorted by strike, with the colours of its Monte
    Carlo points and its reference curve: blue and red for one group, one colour per group for several (each
    group's reference dashed in its own colour)."""
    ordered = sorted(items, key=lambda i: (key(i), strike(i)))
    groups = [(k, list(g)) for k, g in itertools.groupby(ordered, key=key)]
    if len(groups) == 1:
        return [(*groups[0], (ESTIMATE_COLOUR, REFERENCE_COLOUR))]
    return [(k, g, (c, c)) for (k, g), c in zip(groups, itertools.cycle(GROUP_COLOURS), strict=False)]


# --- what a picture is of --------------------------------------------------------------------------------------


def _job_type(result: ResultView) -> str:
    return str(result.raw.type or "")


def _paths(result: ResultView) -> int:
    return int(result.summary.get("paths") or getattr(result.job, "paths", 0))


def _options(results: ResultView | Sequence[ResultView]) -> list[PricedOption]:
    found = priced_options(_listed(results))
    if not found:
        raise ValueError("no option prices here (a book, or option jobs with a strike)")
    return found


def _listed(results: ResultView | Sequence[ResultView]) -> Sequence[ResultView]:
    # a result is no Sequence (it has __getitem__ but no __len__), a list or tuple of them is
    return results if isinstance(results, Sequence) else [results]


def _one_option(results: Sequence[ResultView]) -> bool:
    """Whether ``results`` price one option (or one quantity) and differ only in how they estimate it."""
    def what(result: ResultView) -> tuple[str, dict[str, Any]]:
        return _job_type(result), {k: v for k, v in result.params.items() if k not in ESTIMATOR_PARAMS}

    first = what(results[0])
    return all(r.estimate is not None and what(r) == first for r in results)


def _describe(result: ResultView, varying: frozenset[str] = frozenset()) -> str:
    """What a result is (first line) and the model with its parameters (second line): a picture's title, as its
    type's descriptor words it (``kernels.descriptors``); ``varying`` params a picture shows on an axis."""
    descriptor, job = DESCRIPTORS.get(_job_type(result)), result.job
    if descriptor is None or job is None:
        return f"{_job_type(result)} {result.job_id}"
    return descriptor.describe(job, f"{_paths(result):,} paths", varying)


def _estimate_unit(result: ResultView) -> str:
    descriptor = DESCRIPTORS.get(_job_type(result))
    return descriptor.estimate_unit(result.summary) if descriptor is not None else PRICE_UNIT


def _describe_options(results: ResultView | Sequence[ResultView], options: Sequence[PricedOption]) -> str:
    """A book's own description, or the market the option jobs share."""
    listed = _listed(results)
    if len(listed) == 1:
        return _describe(listed[0])
    market = _describe(listed[0]).splitlines()[-1]  # the second line of a title names the model
    return f"{len(options)} options from {len(listed)} jobs\n{market}"
