"""The report's Heston smile: Black-Scholes implied volatilities of a Heston option book, by strike.

The Monte Carlo prices of a ``heston`` ``option_book`` result are turned into implied volatilities (the
volatility at which Black-Scholes gives the same price), with error bars of one standard error mapped
through the Black-Scholes vega, beside the implied volatilities of the semi-analytic prices.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from statistics import NormalDist
from typing import Any, Final

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from pydantic import BaseModel, ConfigDict

from gpurt.demo.report.plots import DPI, SIZE_IN
from runtime.protocol.messages import JobResult, JobStatus, JobType

MIN_STRIKES: Final = 3  # fewer points than this are not a smile
_N = NormalDist()


class SmilePoint(BaseModel):
    """Implied volatilities at one strike: of the Monte Carlo price (with its error) and of the reference."""

    model_config = ConfigDict(frozen=True)

    strike: float
    implied_vol: float
    implied_vol_error: float
    reference_vol: float


class Smile(BaseModel):
    """A smile at one maturity, from one job."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    maturity: float
    points: list[SmilePoint]


def black_scholes_vega(spot: float, strike: float, rate: float, dividend_yield: float, vol: float, t: float) -> float:
    """dPrice/dvol of a European option (the same for calls and puts)."""
    d1 = (math.log(spot / strike) + (rate - dividend_yield + 0.5 * vol * vol) * t) / (vol * math.sqrt(t))
    return spot * math.exp(-dividend_yield * t) * _N.pdf(d1) * math.sqrt(t)


def implied_vol(price: float, spot: float, strike: float, rate: float, dividend_yield: float, t: float,
                call: bool) -> float | None:
    """The Black-Scholes volatility matching ``price`` (``None`` outside the no-arbitrage bounds)."""
    from scipy.optimize import brentq

    from kernels.closed_form import black_scholes

    def gap(vol: float) -> float:
        return black_scholes(spot, strike, rate, vol, t, call, dividend_yield) - price

    low, high = 1e-4, 5.0
    if gap(low) >= 0 or gap(high) <= 0:
        return None
    return float(brentq(gap, low, high, xtol=1e-10))


def smile_from(results: Iterable[JobResult]) -> Smile | None:
    """The first succeeded Heston ``option_book`` result with enough strikes at one maturity, as a smile."""
    for result in results:
        summary = result.result or {}
        if (result.status is not JobStatus.SUCCEEDED or result.type is not JobType.OPTION_BOOK
                or summary.get("model") != "heston"):
            continue
        smile = _smile(result.job_id, summary)
        if smile is not None:
            return smile
    return None


def _smile(job_id: str, summary: dict[str, Any]) -> Smile | None:
    params = summary.get("params") or {}
    spot, rate, q = params.get("spot"), params.get("rate"), params.get("dividend_yield", 0.0)
    contracts = summary.get("contracts") or []
    by_maturity: dict[float, list[dict[str, Any]]] = {}
    for contract in contracts:
        by_maturity.setdefault(contract["maturity"], []).append(contract)
    maturity, chosen = max(by_maturity.items(), key=lambda item: len(item[1]), default=(0.0, []))
    if len(chosen) < MIN_STRIKES or spot is None or rate is None:
        return None
    points = []
    for contract in sorted(chosen, key=lambda c: c["strike"]):
        call = contract["kind"] == "call"
        vol = implied_vol(contract["estimate"], spot, contract["strike"], rate, q, maturity, call)
        reference = implied_vol(contract["reference"], spot, contract["strike"], rate, q, maturity, call)
        if vol is None or reference is None:
            continue
        vega = black_scholes_vega(spot, contract["strike"], rate, q, vol, maturity)
        points.append(SmilePoint(strike=contract["strike"], implied_vol=vol, reference_vol=reference,
                                 implied_vol_error=contract["std_error"] / vega if vega > 0 else 0.0))
    return Smile(job_id=job_id, maturity=maturity, points=points) if len(points) >= MIN_STRIKES else None


def smile_png(smile: Smile, path: Path) -> Path:
    """Implied volatility against strike: Monte Carlo points with error bars, the semi-analytic curve."""
    fig = Figure(figsize=SIZE_IN, dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    strikes = [p.strike for p in smile.points]
    ax.plot(strikes, [p.reference_vol for p in smile.points], color="#c0392b", linestyle="--",
            label="semi-analytic Heston")
    ax.errorbar(strikes, [p.implied_vol for p in smile.points], yerr=[p.implied_vol_error for p in smile.points],
                fmt="o", color="#1f4e79", capsize=3, label="Monte Carlo (± 1 std error)")
    ax.set_xlabel("strike")
    ax.set_ylabel("Black-Scholes implied volatility")
    ax.set_title(f"Heston smile at T = {smile.maturity:g} ({smile.job_id})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    return path
