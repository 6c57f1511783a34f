"""Vectorised reference implementations the benchmarks compare the kernels with.

The same array code runs on NumPy (CPU) and on cupy (GPU: cuRAND normals, elementwise kernels), chosen
by the array module ``xp``. Each computes the same estimator as its kernel from the same parameters,
chunk by chunk so memory stays bounded, and returns the number of paths (or path-steps) it did.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np

from kernels import heston
from kernels.closed_form import geometric_asian
from kernels.params import (
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


def _normal_tail(xp: Any, z: Any) -> Any:
    """``1 - Phi(z)`` elementwise (scipy's ``ndtr``, or cupy's)."""
    if xp is np:
        from scipy.special import ndtr
    else:  # pragma: no cover - needs a GPU
        from cupyx.scipy.special import ndtr
    return ndtr(-z)


def _qe_step(xp: Any, x: Any, v: Any, zv: Any, z: Any, constants: Any) -> tuple[Any, Any]:
    """``heston.qe_move`` over arrays (paths x assets), ``constants`` its nine per-asset rows: Andersen's QE
    step with martingale correction, both branches evaluated and the right one kept."""
    carry_dt, decay, c1, c2, theta, k1, k2, k3, k4 = constants
    mean = theta + (v - theta) * decay
    psi = (v * c1 + c2) / (mean * mean)
    a = k2 + 0.5 * k4
    quadratic = psi <= heston.PSI_CRITICAL
    # quadratic branch (psi <= 1.5): a (b + Zv)^2, moment-matched
    inverse = 2.0 / xp.minimum(psi, heston.PSI_CRITICAL)
    b2 = inverse - 1.0 + xp.sqrt(inverse) * xp.sqrt(inverse - 1.0)
    scale = mean / (1.0 + b2)
    room = 1.0 - 2.0 * a * scale
    k0_quadratic = xp.where(room > 0, -a * b2 * scale / xp.where(room > 0, room, 1.0)
                            + 0.5 * xp.log(xp.where(room > 0, room, 1.0)), -a * mean)
    # exponential branch: 0 with probability p, else exponential
    p = (xp.maximum(psi, 1.0) - 1.0) / (xp.maximum(psi, 1.0) + 1.0)
    beta = (1.0 - p) / mean
    tail = _normal_tail(xp, zv)
    tail_exp = xp.log((1.0 - p) / xp.where(tail < 1.0 - p, tail, 1.0 - p)) / beta
    safe = a < beta
    k0_exponential = xp.where(safe, -xp.log(p + beta * (1.0 - p) / xp.where(safe, beta - a, 1.0)), -a * mean)
    v_next = xp.where(quadratic, scale * (xp.sqrt(b2) + zv) ** 2, xp.where(tail < 1.0 - p, tail_exp, 0.0))
    k0 = xp.where(quadratic, k0_quadratic, k0_exponential) - (k1 + 0.5 * k3) * v
    sd = xp.sqrt(xp.maximum(k3 * v + k4 * v_next, 0.0))
    return x + carry_dt + k0 + k1 * v + k2 * v_next + sd * z, v_next


def _basket_paths(xp: Any, p: Any, model: Any, n: int, seed: int) -> tuple[Any, Any, Any]:
    """Basket values at every step (n, steps), the terminal basket and, under Heston, the aggregate variance
    at every step (n, steps; else None), by QE steps (Heston) or exact GBM steps, assets correlated by the
    Cholesky factor: the kernel's scheme, NumPy's generator."""
    from kernels import basket

    rng = xp.random.default_rng(seed)
    table = xp.asarray(model.assets.astype(np.float64))
    chol = xp.asarray(model.chol.astype(np.float64))
    constants = table[basket.QE:basket.QE + basket.QE_CONSTANTS]  # the job's step, per asset
    x = xp.zeros((n, model.n))
    v = xp.broadcast_to(table[basket.V0], (n, model.n)).copy()
    values = xp.empty((n, p.steps))
    variances = xp.empty((n, p.steps)) if model.heston else None
    for step in range(p.steps):
        shocks = rng.standard_normal((n, model.n)) @ chol.T
        if model.heston:  # the variance's own shock, and the part of the price shock independent of it
            own = rng.standard_normal((n, model.n))
            rho, rho_bar = table[basket.RHO], table[basket.RHO_BAR]
            x, v = _qe_step(xp, x, v, rho * shocks + rho_bar * own, rho_bar * shocks - rho * own, constants)
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
