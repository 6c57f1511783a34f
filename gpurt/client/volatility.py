"""Black-Scholes implied volatilities of Monte Carlo prices, with their errors: what a smile is drawn from.

Each price is turned into the volatility at which Black-Scholes gives the same price. Its uncertainty maps
through the Black-Scholes vega (d vol = d price / vega): to first order the implied volatility's standard error is the
price's divided by vega, and its interval is the price's interval, at the same confidence, divided by vega.
The reference price (Black-Scholes or semi-analytic Heston), where the kernel computed one, gives the
reference smile.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Final

from gpurt.client.options import PricedOption

if TYPE_CHECKING:
    import pandas as pd

# Where implied volatilities are searched: 0.01% to 500% a year (the protocol's volatility limit).
VOL_BRACKET: Final = (1e-4, 5.0)
FRAME_COLUMNS: Final = ("job_id", "strike", "maturity", "kind", "estimate", "std_error", "implied_vol",
                        "implied_vol_std_error", "implied_vol_ci_low", "implied_vol_ci_high", "confidence",
                        "reference_implied_vol")
_N = NormalDist()


@dataclass(frozen=True)
class SmilePoint:
    """One option's implied volatility with its error and interval, and the reference price's implied volatility.

    ``implied_vol`` is ``None`` where no volatility reproduces the Monte Carlo price (a price outside the
    no-arbitrage bounds, which sampling noise can give deep out of the money); then so are its error and interval.
    """

    option: PricedOption
    implied_vol: float | None
    std_error: float | None
    ci_low: float | None
    ci_high: float | None
    reference: float | None


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

    low, high = VOL_BRACKET
    if gap(low) >= 0 or gap(high) <= 0:
        return None
    return float(brentq(gap, low, high, xtol=1e-10))


def smile_points(options: Iterable[PricedOption]) -> list[SmilePoint]:
    """The implied volatility of each option that has one (a European on one underlying), in the given order."""
    return [_point(option) for option in options if option.has_implied_vol]


def implied_vol_frame(options: Iterable[PricedOption]) -> pd.DataFrame:
    """One row per option with an implied volatility: price, implied volatility, its error, interval, reference."""
    import pandas as pd

    rows = [{"job_id": p.option.job_id, "strike": p.option.strike, "maturity": p.option.maturity,
             "kind": p.option.kind, "estimate": p.option.estimate, "std_error": p.option.std_error,
             "implied_vol": p.implied_vol, "implied_vol_std_error": p.std_error, "implied_vol_ci_low": p.ci_low,
             "implied_vol_ci_high": p.ci_high, "confidence": p.option.confidence,
             "reference_implied_vol": p.reference} for p in smile_points(options)]
    return pd.DataFrame(rows, columns=list(FRAME_COLUMNS))


def _point(option: PricedOption) -> SmilePoint:
    assert option.spot is not None  # has_implied_vol
    market = (option.spot, option.strike, option.rate, option.dividend_yield)
    reference = (None if option.reference is None
                 else implied_vol(option.reference, *market, option.maturity, option.call))
    vol = implied_vol(option.estimate, *market, option.maturity, option.call)
    if vol is None:
        return SmilePoint(option, None, None, None, None, reference)
    vega = black_scholes_vega(*market, vol, option.maturity)
    return SmilePoint(option, vol, option.std_error / vega, vol - (option.estimate - option.ci_low) / vega,
                      vol + (option.ci_high - option.estimate) / vega, reference)
