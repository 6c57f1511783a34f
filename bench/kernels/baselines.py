"""Vectorised reference implementations the benchmarks compare the kernels with.

The same array code runs on NumPy (CPU) and on cupy (GPU: cuRAND normals, elementwise kernels), chosen
by the array module ``xp``. Each computes the same estimator as its kernel from the same parameters,
chunk by chunk so memory stays bounded, and returns the number of paths (or path-steps) it did.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np

from kernels.closed_form import geometric_asian
from protocol.params import (
    TRADING_DAYS_PER_YEAR,
    AsianOptionParams,
    EuropeanOptionParams,
    OptionKind,
    PortfolioVarParams,
    RandomWalkParams,
)

# Random numbers per chunk. NumPy: 512 kB of float64 stays in cache, its best case. cupy: 512 MB, so
# each kernel launch has work enough to fill a GPU and launch overhead vanishes.
CPU_CHUNK_ELEMENTS: Final = 2**16
GPU_CHUNK_ELEMENTS: Final = 2**26


def _chunks(xp: Any, total: int, per_item: int) -> list[int]:
    elements = CPU_CHUNK_ELEMENTS if xp is np else GPU_CHUNK_ELEMENTS
    size = max(1, elements // per_item)
    return [min(size, total - start) for start in range(0, total, size)]


def _payoff(xp: Any, price: Any, strike: float, call: bool) -> Any:
    return xp.maximum(price - strike, 0.0) if call else xp.maximum(strike - price, 0.0)


def _moment_sums(xp: Any, y: Any, x: Any) -> np.ndarray:
    return np.array([float(v) for v in (y.sum(), (y * y).sum(), x.sum(), (x * x).sum(), (x * y).sum())])


def european(xp: Any, p: EuropeanOptionParams) -> np.ndarray:
    """Sums (y, y^2, x, x^2, xy) of antithetic pairs, as the European kernel returns them."""
    rng = xp.random.default_rng(p.seed)
    call = p.kind is OptionKind.CALL
    forward = p.spot * math.exp((p.rate - p.dividend_yield - 0.5 * p.volatility**2) * p.maturity)
    vol_sqrt_t, discount = p.volatility * math.sqrt(p.maturity), math.exp(-p.rate * p.maturity)
    control_mean = p.spot * math.exp(-p.dividend_yield * p.maturity)
    sums = np.zeros(5)
    for n in _chunks(xp, -(-p.paths // 2), 1):
        growth = xp.exp(vol_sqrt_t * rng.standard_normal(n))
        up, down = forward * growth, forward / growth
        y = 0.5 * discount * (_payoff(xp, up, p.strike, call) + _payoff(xp, down, p.strike, call))
        sums += _moment_sums(xp, y, 0.5 * discount * (up + down) - control_mean)
    return sums


def asian(xp: Any, p: AsianOptionParams) -> np.ndarray:
    """Sums (y, y^2, x, x^2, xy) with the geometric-average control, as the Asian kernel returns them."""
    rng = xp.random.default_rng(p.seed)
    call = p.kind is OptionKind.CALL
    dt = p.maturity / p.steps
    drift, vol = (p.rate - p.dividend_yield - 0.5 * p.volatility**2) * dt, p.volatility * math.sqrt(dt)
    discount = math.exp(-p.rate * p.maturity)
    geometric = geometric_asian(p.spot, p.strike, p.rate, p.volatility, p.maturity, p.steps, call, p.dividend_yield)
    sums = np.zeros(5)
    for n in _chunks(xp, p.paths, p.steps):
        log_paths = math.log(p.spot) + xp.cumsum(drift + vol * rng.standard_normal((n, p.steps)), axis=1)
        y = discount * _payoff(xp, xp.exp(log_paths).mean(axis=1), p.strike, call)
        x = discount * _payoff(xp, xp.exp(log_paths.mean(axis=1)), p.strike, call) - geometric
        sums += _moment_sums(xp, y, x)
    return sums


def random_walk(xp: Any, p: RandomWalkParams) -> np.ndarray:
    """Sum and sum of squares of the paths' float32 averages."""
    rng = xp.random.default_rng(p.seed)
    sums = np.zeros(2)
    for n in _chunks(xp, p.paths, p.steps):
        averages = rng.standard_normal((n, p.steps), dtype=xp.float32).mean(axis=1)
        sums += [float(averages.sum()), float((averages * averages).sum())]
    return sums


def portfolio_var(xp: Any, p: PortfolioVarParams) -> Any:
    """Losses per scenario, correlated by the Cholesky factor, then the kernel's own VaR/CVaR summary."""
    from kernels.risk import summarise

    rng = xp.random.default_rng(p.seed)
    n_assets = len(p.exposures)
    correlation = np.asarray(p.correlation) if p.correlation is not None else np.eye(n_assets)
    chol = xp.asarray(np.linalg.cholesky(correlation))
    exposures = xp.asarray(np.asarray(p.exposures, dtype=np.float64))
    scale = xp.asarray(np.asarray(p.volatilities) * math.sqrt(p.horizon_days / TRADING_DAYS_PER_YEAR))
    parts = []
    for n in _chunks(xp, p.paths, n_assets):
        shocks = (rng.standard_normal((n, n_assets)) @ chol.T) * scale
        pnl = shocks @ exposures if p.revaluation == "linear" else xp.expm1(shocks - 0.5 * scale**2) @ exposures
        losses = -pnl
        parts.append(losses.get() if hasattr(losses, "get") else losses)
    return summarise(np.concatenate(parts), p.confidence)


def _basket_paths(xp: Any, p: Any, model: Any, n: int, seed: int) -> tuple[Any, Any, Any]:
    """Basket values at every step (n, steps), the terminal basket and, under Heston, the aggregate variance
    at every step (n, steps; else None), by full-truncation Euler (Heston) or exact GBM steps, assets
    correlated by the Cholesky factor: the kernel's scheme, NumPy's generator."""
    from kernels import basket

    rng = xp.random.default_rng(seed)
    table = xp.asarray(model.assets.astype(np.float64))
    chol = xp.asarray(model.chol.astype(np.float64))
    dt = model.dt
    x = xp.zeros((n, model.n))
    v = xp.broadcast_to(table[basket.V0], (n, model.n)).copy()
    values = xp.empty((n, p.steps))
    variances = xp.empty((n, p.steps)) if model.heston else None
    for step in range(p.steps):
        shocks = rng.standard_normal((n, model.n)) @ chol.T
        if model.heston:
            positive = xp.maximum(v, 0.0)
            root = xp.sqrt(positive * dt)
            x += table[basket.DRIFT] - 0.5 * positive * dt + root * shocks
            variance_shock = table[basket.RHO] * shocks + table[basket.RHO_BAR] * rng.standard_normal((n, model.n))
            v += table[basket.KAPPA_THETA_DT] - table[basket.KAPPA_DT] * positive + table[
                basket.VOL_OF_VOL] * root * variance_shock
        else:
            x += table[basket.DRIFT] + table[basket.VOL] * shocks
        values[:, step] = xp.exp(x) @ table[basket.COEFF]
        if variances is not None:  # the kernel's basket.aggregate_variance
            variances[:, step] = xp.maximum(v, 0.0) @ table[basket.VAR_SHARE]
    return values, values[:, -1], variances


def _host(array: Any) -> np.ndarray:
    return np.asarray(array.get() if hasattr(array, "get") else array)


def basket_lsm_rule(xp: Any, p: Any) -> np.ndarray:
    """The Longstaff-Schwartz exercise rule of ``p`` fitted on NumPy-generated regression paths."""
    from kernels import basket, lsm

    every = p.steps // p.dates()
    regression, _, variances = _basket_paths(xp, p, basket.Model.of(p), p.regression_paths, p.seed + 1)
    at_dates = None if variances is None else _host(variances[:, every - 1::every])
    return lsm.exercise_rule(_host(regression[:, every - 1::every]), p, at_dates)


def basket_lsm_valuation(xp: Any) -> Any:
    """The ``american_option`` estimator (Heston or GBM basket, Longstaff-Schwartz, discounted-basket control
    under Heston) vectorised over paths: a function of the params (and optionally an exercise rule already
    fitted, as for Greeks) returning the price."""
    from kernels import basket, lsm

    def value(p: Any, rule: np.ndarray | None = None) -> float:
        model = basket.Model.of(p)
        if not model.heston:  # a GBM basket's control is the geometric basket option, not written here
            raise NotImplementedError("the baseline covers Heston baskets (the benchmark's case)")
        every = p.steps // p.dates()
        if rule is None:
            rule = basket_lsm_rule(xp, p)
        values, terminal, variances = _basket_paths(xp, p, model, p.paths, p.seed)
        dates, date_variances = values[:, every - 1::every], variances[:, every - 1::every]
        call = p.kind is OptionKind.CALL
        exercise = xp.maximum(dates - p.strike if call else p.strike - dates, 0.0)
        times = p.maturity / p.dates() * xp.arange(1, p.dates() + 1)
        cash = exercise[:, -1] * math.exp(-p.rate * p.maturity)
        alive = xp.ones(p.paths, dtype=bool)
        for date in range(p.dates() - 1):
            if rule[date, -1] > 0:
                design = lsm.basis(dates[:, date] / p.strike, date_variances[:, date], p.basis_degree, xp)
                continuation = design @ xp.asarray(rule[date, :-1].astype(np.float64))
                stop = alive & (exercise[:, date] > 0) & (exercise[:, date] >= continuation)
                cash = xp.where(stop, exercise[:, date] * xp.exp(-p.rate * times[date]), cash)
                alive &= ~stop
        control = math.exp(-p.rate * p.maturity) * terminal - model.control_mean
        beta = float(xp.cov(control, cash)[0, 1] / xp.var(control, ddof=1)) if p.control_variate else 0.0
        return float(xp.mean(cash - beta * control))

    return value
