"""Options on a basket ``A = sum w_i S_i`` of correlated assets, under GBM or per-asset Heston.

One path carries every asset through ``steps`` steps. Its price shocks are ``eps = L z`` with ``L`` the
Cholesky factor of the (validated) correlation matrix; under Heston asset ``i``'s variance shock is
``rho_i eps_i + sqrt(1 - rho_i^2) z'_i`` with ``z'`` independent, and each variance takes full-truncation
Euler steps (``kernels.heston``). GBM steps are exact. A path draws its normals from its own counter
(path, draw), ``ceil(normals per step / 4)`` draws per step.

The same path code prices European baskets and, given Longstaff-Schwartz exercise coefficients
(``kernels.lsm``), American and Bermudan ones: ``path_sums`` walks a path, stops at the first exercise
date where the exercise value beats the regressed continuation value (a polynomial in ``A / K`` and,
under Heston, terms in the basket's aggregate variance ``v``: ``aggregate_variance``), and returns (y, x)
sums with the
control ``x``: under GBM with positive weights the geometric basket option (closed form,
``closed_form.geometric_basket``); otherwise (Heston, weights of either sign for spreads and exchange
options, or a geometric-basket payoff) the discounted basket, an exact martingale of the scheme. The
kernels' ``mode`` says which (``MODE_*``). ``store_path`` writes the
basket value (and, under Heston, the aggregate variance) at every exercise date for the regression.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

import numpy as np
from numba import cuda, njit, prange  # numba.cuda imports without a GPU; kernels compile at first launch
from numba.core.extending import register_jitable

from kernels.closed_form import geometric_basket
from kernels.context import RunContext
from kernels.cuda_reduce import block_sums_kernel
from kernels.estimators import SUM_WIDTH, add_sample
from kernels.launch import BlockKernel, fill_paths, sum_blocks
from kernels.philox import NORMALS_PER_DRAW, normals4
from kernels.special import exp32
from protocol.params import MAX_BASKET_ASSETS, BasketModel, BasketOptionParams, OptionKind

PATHS_PER_BLOCK: Final = 2048  # 8 paths per GPU thread
CPU_CHUNK_ASSET_STEPS: Final = 2**23  # paths x assets x steps per CPU chunk
GPU_CHUNK_ASSET_STEPS: Final = 2**32
# Rows of the per-asset parameter table ``assets[row, i]`` (float32) the kernels read.
# VAR_SHARE: asset i's share |w_i| / sum_j |w_j| of the basket's aggregate variance (Heston). Weights, not
# values at the start: a spot bump (a finite-difference delta) must leave the exercise rule's state as it is.
DRIFT, VOL, V0, KAPPA_DT, KAPPA_THETA_DT, VOL_OF_VOL, RHO, RHO_BAR, COEFF, SHARE, VAR_SHARE = range(11)
ASSET_ROWS: Final = 11
# Under Heston the variance is part of the state an exercise decision depends on: the continuation value's
# basis adds v, v^2, v u and v u^2 (u = A / K, v the aggregate variance) after the polynomial in u.
VARIANCE_TERMS: Final = 4
# Regression paths draw from counters this far above the pricing paths': independent streams.
REGRESSION_STREAM: Final = 2**62
# Scratch per path: log-growth and variance per asset, and the normals of one step (two per asset).
SCRATCH: Final = 4 * MAX_BASKET_ASSETS + NORMALS_PER_DRAW
# How a path steps and which control it carries (the kernels' ``mode``): GBM with the geometric basket
# option as control; Heston (Euler) with the discounted basket; GBM with the discounted basket, for
# weights of either sign (a spread or exchange option), where the geometric basket does not exist.
# MODE_GBM_GEOMETRIC pays on the geometric basket W prod S_i^(w_i/W) instead (GBM, positive weights),
# with the discounted arithmetic basket as control: the geometric option's closed form is its reference.
MODE_GBM, MODE_HESTON, MODE_GBM_SIGNED, MODE_GBM_GEOMETRIC = 0, 1, 2, 3
_ZERO: Final = np.float32(0.0)
_HALF: Final = np.float32(0.5)


@register_jitable
def _start(scratch, assets, n):  # type: ignore[no-untyped-def]
    """Every asset at its spot (log-growth 0) and, under Heston, at its initial variance."""
    for i in range(n):
        scratch[i] = _ZERO
        scratch[n + i] = assets[V0, i]


@register_jitable
def _step(scratch, path, draw0, draws, seed, n, mode, chol, assets, dt):  # type: ignore[no-untyped-def]
    """Advance every asset of ``path`` by one step; the normals are draws ``draw0 .. draw0 + draws``."""
    z = 2 * n  # the normals start after the log-growths and the variances
    for j in range(draws):
        z0, z1, z2, z3 = normals4(path, draw0 + j, seed)
        scratch[z + 4 * j] = z0
        scratch[z + 4 * j + 1] = z1
        scratch[z + 4 * j + 2] = z2
        scratch[z + 4 * j + 3] = z3
    for i in range(n):
        shock = _ZERO
        for k in range(i + 1):
            shock += chol[i, k] * scratch[z + k]
        if mode == MODE_HESTON:
            v = scratch[n + i]
            positive = max(v, _ZERO)
            root = math.sqrt(positive * dt)
            scratch[i] += assets[DRIFT, i] - _HALF * positive * dt + root * shock
            variance_shock = assets[RHO, i] * shock + assets[RHO_BAR, i] * scratch[z + n + i]
            scratch[n + i] = (v + assets[KAPPA_THETA_DT, i] - assets[KAPPA_DT, i] * positive
                              + assets[VOL_OF_VOL, i] * root * variance_shock)
        else:
            scratch[i] += assets[DRIFT, i] + assets[VOL, i] * shock


@register_jitable
def _basket(scratch, assets, n):  # type: ignore[no-untyped-def]
    """The basket value sum w_i S_i of the path's current state."""
    total = _ZERO
    for i in range(n):
        total += assets[COEFF, i] * exp32(scratch[i])
    return total


@register_jitable
def _geometric(scratch, assets, n, log_geometric, total_weight):  # type: ignore[no-untyped-def]
    """The geometric basket ``W prod S_i^(w_i/W)`` of the path's current state."""
    log_g = log_geometric
    for i in range(n):
        log_g += assets[SHARE, i] * scratch[i]
    return total_weight * exp32(log_g)


@register_jitable
def _underlying(scratch, assets, n, mode, log_geometric, total_weight):  # type: ignore[no-untyped-def]
    """What the option pays on: the geometric basket under ``MODE_GBM_GEOMETRIC``, else the basket."""
    if mode == MODE_GBM_GEOMETRIC:
        return _geometric(scratch, assets, n, log_geometric, total_weight)
    return _basket(scratch, assets, n)


@register_jitable
def _payoff(value, strike, call):  # type: ignore[no-untyped-def]
    return max(value - strike, _ZERO) if call else max(strike - value, _ZERO)


@register_jitable
def aggregate_variance(scratch, assets, n):  # type: ignore[no-untyped-def]
    """The basket's variance state under Heston: the assets' variances (floored at 0, as the scheme uses
    them) averaged with the basket's weights, ``VAR_SHARE`` = |w_i| / sum |w_j|."""
    total = _ZERO
    for i in range(n):
        total += assets[VAR_SHARE, i] * max(scratch[n + i], _ZERO)
    return total


@register_jitable
def continuation(coeffs, date, value, strike):  # type: ignore[no-untyped-def]
    """Regressed continuation value at ``date`` under GBM: a polynomial in u = value / strike (Horner)."""
    u = value / strike
    degree = coeffs.shape[1] - 2
    total = coeffs[date, degree]
    for k in range(degree - 1, -1, -1):
        total = total * u + coeffs[date, k]
    return total


@register_jitable
def heston_continuation(coeffs, date, value, strike, variance):  # type: ignore[no-untyped-def]
    """Regressed continuation value at ``date`` under Heston: the polynomial in u = value / strike and
    ``c_v v + c_vv v^2 + c_vu v u + c_vuu v u^2`` (coefficients in that order after the polynomial's).

    Its own Horner loop rather than a helper shared with ``continuation``: under fastmath a shared helper
    compiled the GBM rule's arithmetic differently and moved GBM prices in their last digits.
    """
    u = value / strike
    degree = coeffs.shape[1] - 2 - VARIANCE_TERMS
    total = coeffs[date, degree]
    for k in range(degree - 1, -1, -1):
        total = total * u + coeffs[date, k]
    c = degree + 1
    return total + variance * (coeffs[date, c] + coeffs[date, c + 1] * variance
                               + u * (coeffs[date, c + 2] + coeffs[date, c + 3] * u))


@register_jitable
def path_sample(path, seed, n, mode, chol, assets, dt, steps, draws, every, strike, call, rate,  # type: ignore[no-untyped-def]
                coeffs, log_geometric, total_weight, control_mean, scratch):
    """Discounted cash flow ``y`` of one path under the exercise rule ``coeffs``, and its control ``x``.

    Exercise is tested every ``every`` steps before maturity where ``coeffs[date, -1]`` is 1 (active).
    """
    _start(scratch, assets, n)
    for step in range(steps):
        _step(scratch, path, step * draws, draws, seed, n, mode, chol, assets, dt)
        done = step + 1
        if done < steps and done % every == 0:
            date = done // every - 1
            if coeffs[date, coeffs.shape[1] - 1] > _ZERO:
                value = _underlying(scratch, assets, n, mode, log_geometric, total_weight)
                cash = _payoff(value, strike, call)
                if mode == MODE_HESTON:  # the variance is part of the state (kernels.lsm)
                    stop = cash > _ZERO and cash >= heston_continuation(
                        coeffs, date, value, strike, aggregate_variance(scratch, assets, n))
                else:
                    stop = cash > _ZERO and cash >= continuation(coeffs, date, value, strike)
                if stop:
                    y = exp32(-rate * dt * np.float32(done)) * cash
                    # the control needs the path at maturity: finish it without further exercise
                    for later in range(done, steps):
                        _step(scratch, path, later * draws, draws, seed, n, mode, chol, assets, dt)
                    return y, _control(scratch, assets, n, mode, strike, call, rate, dt, steps, log_geometric,
                                       total_weight, control_mean)
    value = _underlying(scratch, assets, n, mode, log_geometric, total_weight)
    y = exp32(-rate * dt * np.float32(steps)) * _payoff(value, strike, call)
    return y, _control(scratch, assets, n, mode, strike, call, rate, dt, steps, log_geometric, total_weight,
                       control_mean)


@register_jitable
def _control(scratch, assets, n, mode, strike, call, rate, dt, steps, log_geometric, total_weight,  # type: ignore[no-untyped-def]
             control_mean):
    """Mean-zero control at maturity: the geometric basket option (``MODE_GBM``) or the discounted basket."""
    discount = exp32(-rate * dt * np.float32(steps))
    if mode != MODE_GBM:
        return discount * _basket(scratch, assets, n) - control_mean
    return discount * _payoff(_geometric(scratch, assets, n, log_geometric, total_weight), strike, call) - control_mean


@register_jitable
def path_sums(first_path, count, stride, n_paths, seed, n, mode, chol, assets, dt, steps, draws, every,  # type: ignore[no-untyped-def]
              strike, call, rate, coeffs, log_geometric, total_weight, control_mean, scratch):
    """Sums (y, y^2, x, x^2, xy) over paths ``first_path + i * stride``, i < count (both devices run this)."""
    sums = (0.0, 0.0, 0.0, 0.0, 0.0)
    for i in range(count):
        path = first_path + i * stride
        if path >= n_paths:
            break
        y, x = path_sample(path, seed, n, mode, chol, assets, dt, steps, draws, every, strike, call, rate,
                           coeffs, log_geometric, total_weight, control_mean, scratch)
        sums = add_sample(sums, y, x)
    return sums


@register_jitable
def store_path(out, row, path, seed, n, mode, chol, assets, dt, steps, draws, every, scratch):  # type: ignore[no-untyped-def]
    """Write the basket value of ``path`` at every exercise date into ``out[row, :dates]`` and, under Heston,
    its aggregate variance into ``out[row, dates:]`` (``dates = steps // every``)."""
    dates = steps // every
    _start(scratch, assets, n)
    for step in range(steps):
        _step(scratch, path, step * draws, draws, seed, n, mode, chol, assets, dt)
        if (step + 1) % every == 0:
            date = (step + 1) // every - 1
            out[row, date] = _basket(scratch, assets, n)
            if mode == MODE_HESTON:
                out[row, dates + date] = aggregate_variance(scratch, assets, n)


@njit(parallel=True, cache=True, fastmath=True, error_model="numpy")
def _cpu_sums(out, first_block, n_paths, seed, n, mode, chol, assets, dt, steps, draws, every, strike, call,  # type: ignore[no-untyped-def]
              rate, coeffs, log_geometric, total_weight, control_mean):
    for b in prange(out.shape[0]):
        scratch = np.empty(SCRATCH, dtype=np.float32)
        sums = path_sums((first_block + b) * PATHS_PER_BLOCK, PATHS_PER_BLOCK, 1, n_paths, seed, n, mode, chol,
                         assets, dt, steps, draws, every, strike, call, rate, coeffs, log_geometric, total_weight,
                         control_mean, scratch)
        for k in range(len(sums)):
            out[b, k] = sums[k]


@njit(parallel=True, cache=True, fastmath=True, error_model="numpy")
def _cpu_store(out, first_path, stream, seed, n, mode, chol, assets, dt, steps, draws, every):  # type: ignore[no-untyped-def]
    for row in prange(out.shape[0]):
        scratch = np.empty(SCRATCH, dtype=np.float32)
        store_path(out, row, stream + first_path + row, seed, n, mode, chol, assets, dt, steps, draws, every,
                   scratch)


_CUDA_SUMS: Final = block_sums_kernel(path_sums, width=SUM_WIDTH, items_per_block=PATHS_PER_BLOCK, scratch=SCRATCH)


@cache
def _cuda_store() -> Any:
    from numba import float32

    @cuda.jit(fastmath=True)
    def kernel(out, first_path, stream, seed, n, mode, chol, assets, dt, steps, draws, every):  # type: ignore[no-untyped-def]
        scratch = cuda.local.array(SCRATCH, float32)
        row = cuda.grid(1)
        if row < out.shape[0]:
            store_path(out, row, stream + first_path + row, seed, n, mode, chol, assets, dt, steps, draws, every,
                       scratch)

    return kernel


@dataclass(frozen=True)
class Model:
    """Host-side inputs of the basket kernels, derived once from a job's params."""

    n: int
    heston: bool
    mode: int  # MODE_GBM, MODE_HESTON or MODE_GBM_SIGNED
    chol: np.ndarray  # float32 (n, n)
    assets: np.ndarray  # float32 (ASSET_ROWS, n)
    dt: float
    draws: int
    log_geometric: float
    total_weight: float
    control_mean: float  # known mean of the control

    @classmethod
    def of(cls, p: BasketOptionParams) -> Model:
        """The kernel inputs of ``p``."""
        n = len(p.spots)
        spots, weights = np.asarray(p.spots, dtype=float), np.asarray(p.weights, dtype=float)
        yields = np.asarray(p.yields(), dtype=float)
        correlation = np.asarray(p.correlation, dtype=float) if p.correlation is not None else np.eye(n)
        dt = p.maturity / p.steps
        table = np.zeros((ASSET_ROWS, n))
        table[COEFF] = weights * spots
        heston = p.model is BasketModel.HESTON
        signed = bool(np.any(weights < 0))
        mode = (MODE_HESTON if heston else MODE_GBM_SIGNED if signed
                else MODE_GBM_GEOMETRIC if p.payoff == "geometric" else MODE_GBM)
        if mode in (MODE_GBM, MODE_GBM_GEOMETRIC):  # the geometric basket's exponents
            table[SHARE] = weights / weights.sum()
        discount = math.exp(-p.rate * p.maturity)
        forwards = discount * np.sum(weights * spots * np.exp((p.rate - yields) * p.maturity))
        if heston:
            h = p.heston
            assert h is not None  # validated by BasketOptionParams
            kappa = np.asarray(h.mean_reversion)
            table[DRIFT] = (p.rate - yields) * dt
            table[V0], table[KAPPA_DT], table[KAPPA_THETA_DT] = h.initial_variance, kappa * dt, kappa * dt * np.asarray(
                h.long_variance)
            table[VOL_OF_VOL], table[RHO] = h.vol_of_vol, h.correlation
            table[RHO_BAR] = np.sqrt(np.maximum(1.0 - np.asarray(h.correlation) ** 2, 0.0))
            table[VAR_SHARE] = np.abs(weights) / np.sum(np.abs(weights))
            control_mean = float(forwards)
        else:
            vols = np.asarray(p.volatilities, dtype=float)
            table[DRIFT] = (p.rate - yields - 0.5 * vols**2) * dt
            table[VOL] = vols * math.sqrt(dt)
            control_mean = float(forwards) if mode != MODE_GBM else geometric_basket(
                spots, weights, vols, yields, correlation, p.strike, p.rate, p.maturity, p.kind is OptionKind.CALL)
        normals = 2 * n if heston else n
        return cls(n=n, heston=heston, mode=mode, chol=np.linalg.cholesky(correlation).astype(np.float32),
                   assets=table.astype(np.float32), dt=dt, draws=-(-normals // NORMALS_PER_DRAW),
                   log_geometric=float(table[SHARE] @ np.log(spots)), total_weight=float(weights.sum()),
                   control_mean=control_mean)

    def walk_args(self, seed: int, steps: int, every: int) -> tuple[Any, ...]:
        """``(seed, n, mode, chol, assets, dt, steps, draws, every)`` as the kernels take them."""
        return (np.int64(seed), np.int64(self.n), np.int64(self.mode), self.chol, self.assets, np.float32(self.dt),
                np.int64(steps), np.int64(self.draws), np.int64(every))

    def control_scale(self, p: BasketOptionParams) -> float:
        """Size of the float32 terms of the control (for the interval's rounding bound)."""
        if self.mode == MODE_GBM_SIGNED:  # the discounted basket's terms, whatever their signs
            return 2.0 * (float(np.sum(np.abs(self.assets[COEFF].astype(float)))) + p.strike)
        return 2.0 * (self.control_mean + p.strike * math.exp(-p.rate * p.maturity))


def no_exercise() -> np.ndarray:
    """Exercise coefficients of a European option: one inactive row."""
    return np.zeros((1, 3), dtype=np.float32)


def discounted_sums(p: BasketOptionParams, model: Model, coeffs: np.ndarray, every: int, n_paths: int, device: str,
                    ctx: RunContext) -> np.ndarray:
    """(y, y^2, x, x^2, xy) over ``n_paths`` pricing paths under the exercise rule ``coeffs``."""
    args = (np.int64(n_paths), *model.walk_args(p.seed, p.steps, every), np.float32(p.strike),
            p.kind is OptionKind.CALL, np.float32(p.rate), coeffs, np.float32(model.log_geometric),
            np.float32(model.total_weight), np.float32(model.control_mean))
    per_block = PATHS_PER_BLOCK * model.n * p.steps
    kernel = BlockKernel(width=SUM_WIDTH, cpu=_cpu_sums, cuda_factory=_CUDA_SUMS,
                         cpu_chunk_blocks=max(1, CPU_CHUNK_ASSET_STEPS // per_block),
                         gpu_chunk_blocks=max(1, GPU_CHUNK_ASSET_STEPS // per_block))
    return sum_blocks(kernel, -(-n_paths // PATHS_PER_BLOCK), args, device, ctx)


def basket_values(p: BasketOptionParams, model: Model, n_paths: int, every: int, dates: int, device: str,
                  ctx: RunContext) -> tuple[np.ndarray, np.ndarray | None]:
    """Basket values ``(n_paths, dates)`` of regression paths (independent of the pricing paths) at each
    exercise date, and under Heston their aggregate variances there (same shape; None under GBM)."""
    states = np.empty((n_paths, 2 * dates if model.heston else dates), dtype=np.float32)  # store_path's rows
    per_block = PATHS_PER_BLOCK * model.n * p.steps
    fill_paths(states, PATHS_PER_BLOCK, _cpu_store, _cuda_store,
               (np.int64(REGRESSION_STREAM), *model.walk_args(p.seed, p.steps, every)), device, ctx,
               cpu_chunk_blocks=max(1, CPU_CHUNK_ASSET_STEPS // per_block),
               gpu_chunk_blocks=max(1, GPU_CHUNK_ASSET_STEPS // per_block))
    return states[:, :dates], (states[:, dates:] if model.heston else None)

