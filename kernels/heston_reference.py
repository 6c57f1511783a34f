"""Semi-analytic price of a European option under the Heston model: the reference the Heston kernel is
checked against.

Heston (1993): ``dS = (r - q) S dt + sqrt(v) S dW1``, ``dv = kappa (theta - v) dt + xi sqrt(v) dW2``,
``d<W1, W2> = rho dt``. The call is ``S e^{-qT} P1 - K e^{-rT} P2`` with the two probabilities written as
Fourier integrals of the characteristic function of ``log S_T``, taken in the "little Heston trap" form
(Albrecher, Mayer, Schoutens, Tistaert 2007) whose complex logarithm never crosses its branch cut, and
integrated numerically with ``scipy.integrate.quad``. Puts follow by put-call parity.
"""

from __future__ import annotations

import cmath
import math
from dataclasses import dataclass
from typing import Final

# quad's tolerances on each probability: far below what any Monte Carlo run resolves.
_ABS_TOL: Final = 1e-9
_REL_TOL: Final = 1e-9
_SUBINTERVALS: Final = 500


@dataclass(frozen=True)
class HestonModel:
    """Parameters of the Heston model (variances, not volatilities)."""

    initial_variance: float
    long_variance: float
    mean_reversion: float
    vol_of_vol: float
    correlation: float


def characteristic_function(u: complex, spot: float, rate: float, dividend_yield: float, maturity: float,
                            model: HestonModel) -> complex:
    """``E[exp(i u log S_T)]`` under the risk-neutral Heston dynamics."""
    kappa, theta, xi, rho = model.mean_reversion, model.long_variance, model.vol_of_vol, model.correlation
    iu = 1j * u
    beta = kappa - rho * xi * iu
    d = cmath.sqrt(beta * beta + xi * xi * (iu + u * u))
    g = (beta - d) / (beta + d)
    decay = cmath.exp(-d * maturity)
    c = (rate - dividend_yield) * iu * maturity + kappa * theta / xi**2 * (
        (beta - d) * maturity - 2.0 * cmath.log((1.0 - g * decay) / (1.0 - g)))
    dd = (beta - d) / xi**2 * (1.0 - decay) / (1.0 - g * decay)
    return cmath.exp(c + dd * model.initial_variance + iu * math.log(spot))


def heston_price(spot: float, strike: float, rate: float, dividend_yield: float, maturity: float,
                 model: HestonModel, call: bool = True) -> float:
    """Price of a European call (or put) under the Heston model, by numerical Fourier inversion."""
    from scipy.integrate import quad

    log_strike = math.log(strike)
    forward_cf = spot * math.exp((rate - dividend_yield) * maturity)  # phi(-i) = E[S_T]

    def cf(u: complex) -> complex:
        return characteristic_function(u, spot, rate, dividend_yield, maturity, model)

    def p1_integrand(u: float) -> float:
        return (cmath.exp(-1j * u * log_strike) * cf(u - 1j) / (1j * u * forward_cf)).real

    def p2_integrand(u: float) -> float:
        return (cmath.exp(-1j * u * log_strike) * cf(u) / (1j * u)).real

    options = {"limit": _SUBINTERVALS, "epsabs": _ABS_TOL, "epsrel": _REL_TOL}
    p1 = 0.5 + quad(p1_integrand, 0.0, math.inf, **options)[0] / math.pi
    p2 = 0.5 + quad(p2_integrand, 0.0, math.inf, **options)[0] / math.pi
    call_price = spot * math.exp(-dividend_yield * maturity) * p1 - strike * math.exp(-rate * maturity) * p2
    if call:
        return call_price
    return call_price - spot * math.exp(-dividend_yield * maturity) + strike * math.exp(-rate * maturity)
