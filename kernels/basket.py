"""Options on a basket ``A = sum w_i S_i`` of correlated assets, under GBM or per-asset Heston.

One path carries every asset through ``steps`` steps. Its price shocks are ``eps = L z`` with ``L`` the
Cholesky factor of the (validated) correlation matrix. GBM steps are exact. Under Heston asset ``i``'s
variance shock is ``zv_i = rho_i eps_i + sqrt(1 - rho_i^2) z'_i`` (``z'`` independent) and every asset
takes ``kernels.heston``'s QE step (Andersen's scheme with martingale correction, ``heston.qe_move``):
its variance from ``zv_i``, its log-price from the new variance and the residual price shock
``sqrt(1 - rho_i^2) eps_i - rho_i z'_i``, which is the part of ``eps_i`` independent of ``zv_i``. So each
asset has the correlation ``rho_i`` with its variance, the price shocks the correlation matrix, and each
discounted asset is a martingale of the scheme at any step count. A path reads its normals as one
stream: normal ``k`` is lane ``k mod 4`` of the generator's draw ``(path, k // 4)``, ``normals`` per step
(``n`` under GBM, ``2 n`` under Heston), so a one-asset GBM path calls the generator once every four
steps instead of discarding three normals of four (the CPU path's largest cost, found by profiling).

**Discretisation bias** (Heston): with ``halving`` the kernel walks every pricing path a second time at
``steps / 2`` double steps, each driven by ``(Z_a + Z_b) / sqrt 2`` of the normals of its two fine steps
(the same counters: common random numbers), under the same exercise rule on the same clock, and sums
``d = coarse - fine`` discounted cash flows: the step-halving estimate of the bias (``heston.discretisation_bias``).

The same path code prices European baskets and, given Longstaff-Schwartz exercise coefficients
(``kernels.lsm``), American and Bermudan ones: ``path_sums`` walks a path, stops at the first exercise
date where the exercise value beats the regressed continuation value (a polynomial in ``A / K`` and,
under Heston, terms in the basket's aggregate variance ``v``: ``aggregate_variance``), and returns (y, x)
sums with the
control ``x``: under GBM with positive weights the geometric basket option (closed form,
``closed_form.geometric_basket``; on a path exercised early, its closed-form value at the exercise date:
``_stopped_control``); otherwise (Heston, weights of either sign for spreads and exchange
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

from kernels import heston
from kernels.chunks import run_chunks, warm_up
from kernels.closed_form import geometric_basket
from kernels.context import RunContext
from kernels.cuda_reduce import block_sums_kernel
from kernels.device import CPU, GPU
from kernels.estimators import SUM_WIDTH, add_sample
from kernels.launch import BlockKernel, sum_blocks, warm_key
from kernels.params import MAX_BASKET_ASSETS, BasketModel, BasketOptionParams, OptionKind
from kernels.philox import NORMALS_PER_DRAW, normals4
from kernels.special import exp32, log32, normal_tail

# One path per GPU thread: a basket walk is hundreds of dependent steps, so a thread's paths run one after
# another at the step's latency; at 8 a thread the 25,000 pricing paths of the STAC-shaped case were 13
# blocks on a 132-multiprocessor GPU, and the pricing pass took a third of the job.
PATHS_PER_BLOCK: Final = 256
CPU_CHUNK_ASSET_STEPS: Final = 2**23  # paths x assets x steps per CPU chunk
GPU_CHUNK_ASSET_STEPS: Final = 2**32
# Rows of the per-asset parameter table ``assets[row, i]`` (float32) the kernels read.
# VAR_SHARE: asset i's share |w_i| / sum_j |w_j| of the basket's aggregate variance (Heston). Weights, not
# values at the start: a spot bump (a finite-difference delta) must leave the exercise rule's state as it is.
DRIFT, VOL, V0, RHO, RHO_BAR, COEFF, SHARE, VAR_SHARE = range(8)
# Under Heston, rows QE .. QE + QE_CONSTANTS - 1 hold asset i's QE step constants (``heston.step_constants``)
# for the job's step, and the next QE_CONSTANTS rows those of the double step of the bias estimate.
QE: Final = 8
QE_CONSTANTS: Final = 9
ASSET_ROWS: Final = QE + 2 * QE_CONSTANTS
# The price kernels' sums, as heston_option's (the estimator's five, then sum d and sum d^2, d = coarse -
# fine), then the estimator's five of the same paths' European cash flow e with the control at maturity t
# (sum e, e^2, t, t^2, t e): one pass prices both.
PRICE_WIDTH: Final = heston.PRICE_WIDTH + SUM_WIDTH
EUROPEAN: Final = heston.PRICE_WIDTH  # where the European's sums start
# Under Heston the variance is part of the state an exercise decision depends on: the continuation value's
# basis adds v, v^2, v u and v u^2 (u = A / K, v the aggregate variance) after the polynomial in u.
VARIANCE_TERMS: Final = 4
# Regression paths draw from counters this far above the pricing paths': independent streams.
REGRESSION_STREAM: Final = 2**62
# Scratch per path: log-growth and variance per asset, the normals of one step (two per asset), and the
# generator's current draw of four normals (at BUFFER), which the path's stream reads lane by lane.
BUFFER: Final = 4 * MAX_BASKET_ASSETS
SCRATCH: Final = BUFFER + NORMALS_PER_DRAW
# How a path steps and which control it carries (the kernels' ``mode``): GBM with the geometric basket
# option as control; Heston (QE) with the discounted basket; GBM with the discounted basket, for
# weights of either sign (a spread or exchange option), where the geometric basket does not exist.
# MODE_GBM_GEOMETRIC pays on the geometric basket W prod S_i^(w_i/W) instead (GBM, positive weights),
# with the discounted arithmetic basket as control: the geometric option's closed form is its reference.
MODE_GBM, MODE_HESTON, MODE_GBM_SIGNED, MODE_GBM_GEOMETRIC = 0, 1, 2, 3
_ZERO: Final = np.float32(0.0)
_ONE: Final = np.float32(1.0)
_HALF: Final = np.float32(0.5)
_ROOT_HALF: Final = np.float32(math.sqrt(0.5))


@register_jitable
def _start(scratch, assets, n):  # type: ignore[no-untyped-def]
    """Every asset at its spot (log-growth 0) and, under Heston, at its initial variance."""
    for i in range(n):
        scratch[i] = _ZERO
        scratch[n + i] = assets[V0, i]


@register_jitable
def _normal(scratch, path, k, seed, table):  # type: ignore[no-untyped-def]
    """Normal ``k`` of the path's stream; read in order from ``k = 0`` (a new draw at every fourth), or
    ``table[k, path]`` where the caller generated the stream once (``normal_table``). A caller without a
    table passes None, which numba prunes at compile time."""
    if table is not None:
        return table[k, path]
    lane = k % NORMALS_PER_DRAW
    if lane == 0:
        z0, z1, z2, z3 = normals4(path, k // NORMALS_PER_DRAW, seed)
        scratch[BUFFER] = z0
        scratch[BUFFER + 1] = z1
        scratch[BUFFER + 2] = z2
        scratch[BUFFER + 3] = z3
    return scratch[BUFFER + lane]


@register_jitable
def _step(scratch, path, cursor, normals, seed, n, mode, chol, assets, coarse, sign, table):  # type: ignore[no-untyped-def]
    """Advance every asset of ``path`` by one step on normals ``cursor .. cursor + normals`` of its stream
    (times ``sign``: -1 walks the antithetic path), or with ``coarse`` by one double step (Heston) on
    ``(Z_a + Z_b) / sqrt 2`` of those and the next ``normals``; returns the cursor after them. ``table``:
    the stream generated ahead, or None (``_normal``)."""
    z = 2 * n  # the step's normals start after the log-growths and the variances
    for j in range(normals):
        scratch[z + j] = sign * _normal(scratch, path, cursor + j, seed, table)
    if coarse:
        for j in range(normals):
            second = sign * _normal(scratch, path, cursor + normals + j, seed, table)
            scratch[z + j] = (scratch[z + j] + second) * _ROOT_HALF
    for i in range(n):
        shock = _ZERO
        for k in range(i + 1):
            shock += chol[i, k] * scratch[z + k]
        if mode == MODE_HESTON:
            rho = assets[RHO, i]
            rho_bar = assets[RHO_BAR, i]
            own = scratch[z + n + i]
            c = QE + QE_CONSTANTS if coarse else QE
            scratch[i], scratch[n + i], _ = heston.qe_move(
                scratch[i], scratch[n + i], rho * shock + rho_bar * own, rho_bar * shock - rho * own,
                assets[c, i], assets[c + 1, i], assets[c + 2, i], assets[c + 3, i], assets[c + 4, i],
                assets[c + 5, i], assets[c + 6, i], assets[c + 7, i], assets[c + 8, i])
        else:
            scratch[i] += assets[DRIFT, i] + assets[VOL, i] * shock
    return cursor + (2 * normals if coarse else normals)


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
    """The basket's variance state under Heston: the assets' variances (never negative under QE; the floor
    at 0 keeps the rule's state well defined whatever the scheme) averaged with the basket's weights,
    ``VAR_SHARE`` = |w_i| / sum |w_j|."""
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
                coeffs, log_geometric, total_weight, control_mean, scratch, table):
    """Discounted cash flow ``y`` of one path under the exercise rule ``coeffs``, the walk ending where the
    path is exercised (no control, no European: a revaluation of ``kernels.fd_greeks`` needs neither), on
    the path's normals from ``table`` (``normal_table``; ``path`` is then the path's column there) or, with
    None, drawn as it goes.

    Exercise is tested every ``every`` steps before maturity where ``coeffs[date, -1]`` is 1 (active).
    """
    y, _, _, _ = _walk_sample(path, seed, n, mode, chol, assets, dt, steps, draws, every, strike, call, rate,
                              coeffs, log_geometric, total_weight, control_mean, scratch, False, _ONE, False, table)
    return y


@register_jitable
def _walk_sample(path, seed, n, mode, chol, assets, dt, steps, draws, every, strike, call, rate,  # type: ignore[no-untyped-def]
                 coeffs, log_geometric, total_weight, control_mean, scratch, coarse, sign, finish, table):
    """The path's discounted cash flow ``y`` under the exercise rule ``coeffs``, its control ``x``, its European
    cash flow (no exercise) and its control at maturity; or with ``coarse`` the same at ``steps / 2`` double
    steps (Heston, ``steps`` even): the clock still counts fine steps, so the coarse path can stop at the
    dates on its own grid. ``draws`` is the number of normals per step. Without ``finish`` the walk ends at
    exercise and only ``y`` is meaningful (the others are 0): an exercised path's last steps, walked for the
    European and the control, are then not walked at all. ``table``: the path's normals generated ahead, or
    None (``_normal``)."""
    stride = 2 if coarse else 1
    cursor = 0
    _start(scratch, assets, n)
    for step in range(0, steps, stride):
        cursor = _step(scratch, path, cursor, draws, seed, n, mode, chol, assets, coarse, sign, table)
        done = step + stride
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
                    if not finish:
                        return y, _ZERO, _ZERO, _ZERO
                    # under GBM the control stops with the path; the other modes' control, and the European
                    # of every mode, need the path at maturity: finish it without exercise
                    stopped = _stopped_control(scratch, assets, chol, n, strike, call, rate, dt, steps, done,
                                               log_geometric, total_weight, control_mean) if mode == MODE_GBM else _ZERO
                    for _ in range(done, steps, stride):
                        cursor = _step(scratch, path, cursor, draws, seed, n, mode, chol, assets, coarse, sign,
                                       table)
                    value = _underlying(scratch, assets, n, mode, log_geometric, total_weight)
                    european = exp32(-rate * dt * np.float32(steps)) * _payoff(value, strike, call)
                    terminal = _control(scratch, assets, n, mode, strike, call, rate, dt, steps, log_geometric,
                                        total_weight, control_mean)
                    return y, stopped if mode == MODE_GBM else terminal, european, terminal
    value = _underlying(scratch, assets, n, mode, log_geometric, total_weight)
    y = exp32(-rate * dt * np.float32(steps)) * _payoff(value, strike, call)
    terminal = _control(scratch, assets, n, mode, strike, call, rate, dt, steps, log_geometric, total_weight,
                        control_mean)
    return y, terminal, y, terminal


@register_jitable
def _stopped_control(scratch, assets, chol, n, strike, call, rate, dt, steps, done, log_geometric,  # type: ignore[no-untyped-def]
                     total_weight, control_mean):
    """``MODE_GBM``'s control stopped at step ``done < steps``: the geometric basket option's value there in
    closed form, discounted to time 0, less its mean.

    The discounted option value is a martingale and the exercise date a stopping time, so this control has
    the same known mean as the option's discounted payoff at maturity (which it equals on a path never
    exercised), and it follows the American cash flow far more closely: on an exercised path it is the
    European value given up, not a payoff drawn on after the decision. Given the path at ``done``, ``log G_T``
    is normal: each remaining step adds ``sum s_i DRIFT_i`` to its mean and ``|(s VOL)' L|^2`` to its variance
    (``s`` the geometric shares, ``L`` the correlation's Cholesky factor: the walk's own float32 constants).
    """
    drift = _ZERO
    step_variance = _ZERO
    for k in range(n):
        drift += assets[SHARE, k] * assets[DRIFT, k]
        load = _ZERO  # the loading of log G's step on normal k: L is lower triangular
        for i in range(k, n):
            load += assets[SHARE, i] * assets[VOL, i] * chol[i, k]
        step_variance += load * load
    left = np.float32(steps - done)
    log_mean = log32(total_weight) + log_geometric + left * drift
    for i in range(n):
        log_mean += assets[SHARE, i] * scratch[i]
    log_var = left * step_variance
    discount = exp32(-rate * dt * np.float32(steps))
    forward = exp32(log_mean + _HALF * log_var)
    if log_var <= _ZERO:  # no volatility left: the forward is what the geometric basket will be
        return discount * _payoff(forward, strike, call) - control_mean
    sd = np.float32(math.sqrt(log_var))
    d1 = (log_mean - log32(strike) + log_var) / sd
    d2 = d1 - sd
    if call:
        value = forward * normal_tail(-d1) - strike * normal_tail(-d2)
    else:
        value = strike * normal_tail(d2) - forward * normal_tail(d1)
    return discount * value - control_mean


@register_jitable
def _control(scratch, assets, n, mode, strike, call, rate, dt, steps, log_geometric, total_weight,  # type: ignore[no-untyped-def]
             control_mean):
    """Mean-zero control at maturity: the geometric basket option (``MODE_GBM``) or the discounted basket."""
    discount = exp32(-rate * dt * np.float32(steps))
    if mode != MODE_GBM:
        return discount * _basket(scratch, assets, n) - control_mean
    return discount * _payoff(_geometric(scratch, assets, n, log_geometric, total_weight), strike, call) - control_mean


@register_jitable
def _pair(path, seed, n, mode, chol, assets, dt, steps, draws, every, strike, call, rate,  # type: ignore[no-untyped-def]
          coeffs, log_geometric, total_weight, control_mean, scratch, coarse, antithetic):
    """``_walk_sample`` of ``path``, or with ``antithetic`` the mean of it and its antithetic walk."""
    y, x, e, t = _walk_sample(path, seed, n, mode, chol, assets, dt, steps, draws, every, strike, call, rate, coeffs,
                              log_geometric, total_weight, control_mean, scratch, coarse, _ONE, True, None)
    if antithetic:
        y2, x2, e2, t2 = _walk_sample(path, seed, n, mode, chol, assets, dt, steps, draws, every, strike, call, rate,
                                      coeffs, log_geometric, total_weight, control_mean, scratch, coarse, -_ONE, True,
                                      None)
        y, x, e, t = _HALF * (y + y2), _HALF * (x + x2), _HALF * (e + e2), _HALF * (t + t2)
    return y, x, e, t


@register_jitable
def path_sums(first_path, count, stride, n_paths, seed, n, mode, chol, assets, dt, steps, draws, every,  # type: ignore[no-untyped-def]
              strike, call, rate, coeffs, log_geometric, total_weight, control_mean, halving, antithetic, scratch):
    """Sums (y, y^2, x, x^2, xy, d, d^2, e, e^2, t, t^2, te) over samples ``first_path + i * stride``, i < count
    (both devices run this): a sample is a path, or with ``antithetic`` the pair of walks on ``z`` and ``-z``;
    ``x`` is the price's control (under ``MODE_GBM`` stopped at exercise: ``_stopped_control``), ``d`` the
    coarse-minus-fine cash flow with ``halving`` (else 0), ``e`` the European cash flow and ``t`` the
    control at maturity, the European's own control."""
    sums = (0.0, 0.0, 0.0, 0.0, 0.0)
    gap = 0.0
    gap2 = 0.0
    european_sums = (0.0, 0.0, 0.0, 0.0, 0.0)
    for i in range(count):
        path = first_path + i * stride
        if path >= n_paths:
            break
        y, x, european, terminal = _pair(path, seed, n, mode, chol, assets, dt, steps, draws, every, strike, call,
                                         rate, coeffs, log_geometric, total_weight, control_mean, scratch, False,
                                         antithetic)
        sums = add_sample(sums, y, x)
        european_sums = add_sample(european_sums, european, terminal)
        if halving:
            coarse, _, _, _ = _pair(path, seed, n, mode, chol, assets, dt, steps, draws, every, strike, call, rate,
                                    coeffs, log_geometric, total_weight, control_mean, scratch, True, antithetic)
            d = np.float64(coarse - y)
            gap += d
            gap2 += d * d
    return (sums[0], sums[1], sums[2], sums[3], sums[4], gap, gap2, european_sums[0], european_sums[1],
            european_sums[2], european_sums[3], european_sums[4])


@register_jitable
def store_path(out, row, path, seed, n, mode, chol, assets, dt, steps, draws, every, scratch,  # type: ignore[no-untyped-def]
               date_major):
    """Write the basket value of ``path`` at every exercise date into ``out[row, :dates]`` and, under Heston,
    its aggregate variance into ``out[row, dates:]`` (``dates = steps // every``); with ``date_major`` into
    ``out[:dates, row]`` and ``out[dates:, row]`` instead (``regression_states_on_device``)."""
    dates = steps // every
    cursor = 0
    _start(scratch, assets, n)
    for step in range(steps):
        cursor = _step(scratch, path, cursor, draws, seed, n, mode, chol, assets, False, _ONE, None)
        if (step + 1) % every == 0:
            date = (step + 1) // every - 1
            value = _basket(scratch, assets, n)
            variance = aggregate_variance(scratch, assets, n) if mode == MODE_HESTON else _ZERO
            if date_major:
                out[date, row] = value
                if mode == MODE_HESTON:
                    out[dates + date, row] = variance
            else:
                out[row, date] = value
                if mode == MODE_HESTON:
                    out[row, dates + date] = variance


@njit(parallel=True, cache=True, fastmath=True, error_model="numpy")
def _cpu_sums(out, first_block, n_paths, seed, n, mode, chol, assets, dt, steps, draws, every, strike, call,  # type: ignore[no-untyped-def]
              rate, coeffs, log_geometric, total_weight, control_mean, halving, antithetic):
    for b in prange(out.shape[0]):
        scratch = np.empty(SCRATCH, dtype=np.float32)
        sums = path_sums((first_block + b) * PATHS_PER_BLOCK, PATHS_PER_BLOCK, 1, n_paths, seed, n, mode, chol,
                         assets, dt, steps, draws, every, strike, call, rate, coeffs, log_geometric, total_weight,
                         control_mean, halving, antithetic, scratch)
        for k in range(len(sums)):
            out[b, k] = sums[k]


@njit(parallel=True, cache=True, fastmath=True, error_model="numpy")
def _cpu_store(out, first_path, stream, seed, n, mode, chol, assets, dt, steps, draws, every):  # type: ignore[no-untyped-def]
    for row in prange(out.shape[0]):
        scratch = np.empty(SCRATCH, dtype=np.float32)
        store_path(out, row, stream + first_path + row, seed, n, mode, chol, assets, dt, steps, draws, every,
                   scratch, False)


_CUDA_SUMS: Final = block_sums_kernel(path_sums, width=PRICE_WIDTH, items_per_block=PATHS_PER_BLOCK,
                                     scratch=SCRATCH)


@cache
def _cuda_store_columns() -> Any:
    from numba import float32

    @cuda.jit(fastmath=True)
    def kernel(out, first_path, count, stream, seed, n, mode, chol, assets, dt, steps, draws, every):  # type: ignore[no-untyped-def]
        scratch = cuda.local.array(SCRATCH, float32)
        k = cuda.grid(1)
        if k < count:
            store_path(out, first_path + k, stream + first_path + k, seed, n, mode, chol, assets, dt, steps, draws,
                       every, scratch, True)

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
    draws: int  # normals per step of a path's stream
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
        stochastic = p.model is BasketModel.HESTON
        signed = bool(np.any(weights < 0))
        mode = (MODE_HESTON if stochastic else MODE_GBM_SIGNED if signed
                else MODE_GBM_GEOMETRIC if p.payoff == "geometric" else MODE_GBM)
        if mode in (MODE_GBM, MODE_GBM_GEOMETRIC):  # the geometric basket's exponents
            table[SHARE] = weights / weights.sum()
        discount = math.exp(-p.rate * p.maturity)
        forwards = discount * np.sum(weights * spots * np.exp((p.rate - yields) * p.maturity))
        if stochastic:
            h = p.heston
            assert h is not None  # validated by BasketOptionParams
            table[V0], table[RHO] = h.initial_variance, h.correlation
            table[RHO_BAR] = np.sqrt(np.maximum(1.0 - np.asarray(h.correlation) ** 2, 0.0))
            for i in range(n):  # the job's step, then the bias estimate's double step
                for k, h_dt in enumerate((dt, 2.0 * dt)):
                    table[QE + k * QE_CONSTANTS:QE + (k + 1) * QE_CONSTANTS, i] = heston.step_constants(
                        p.rate - yields[i], h.mean_reversion[i], h.long_variance[i], h.vol_of_vol[i],
                        h.correlation[i], h_dt)
            table[VAR_SHARE] = np.abs(weights) / np.sum(np.abs(weights))
            control_mean = float(forwards)
        else:
            vols = np.asarray(p.volatilities, dtype=float)
            table[DRIFT] = (p.rate - yields - 0.5 * vols**2) * dt
            table[VOL] = vols * math.sqrt(dt)
            control_mean = float(forwards) if mode != MODE_GBM else geometric_basket(
                spots, weights, vols, yields, correlation, p.strike, p.rate, p.maturity, p.kind is OptionKind.CALL)
        normals = 2 * n if stochastic else n
        return cls(n=n, heston=stochastic, mode=mode, chol=np.linalg.cholesky(correlation).astype(np.float32),
                   assets=table.astype(np.float32), dt=dt, draws=normals,
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


def halving_possible(p: BasketOptionParams, every: int) -> bool:
    """Whether the step-halving pair exists: Heston, an even number of steps, and every exercise date (every
    ``every`` steps) on the coarse grid, or exercise at every step (an American option, whose coarse twin
    then has half the dates: the estimate covers the exercise dates' discretisation too)."""
    return p.model is BasketModel.HESTON and p.steps % 2 == 0 and (every % 2 == 0 or every == 1)


def samples(p: BasketOptionParams, n_paths: int) -> int:
    """Samples of ``n_paths`` pricing paths: the paths, or with ``antithetic`` their pairs."""
    return -(-n_paths // 2) if p.antithetic else n_paths


def discounted_sums(p: BasketOptionParams, model: Model, coeffs: np.ndarray, every: int, n_paths: int, device: str,
                    ctx: RunContext, halving: bool = False) -> np.ndarray:
    """(y, y^2, x, x^2, xy, d, d^2, e, e^2, xe) over the ``samples`` of ``n_paths`` pricing paths under the
    exercise rule ``coeffs``; with ``halving`` (where ``halving_possible``) ``d`` is each sample's
    coarse-minus-fine cash flow, else 0; ``e`` the European cash flow."""
    n_samples = samples(p, n_paths)
    args = (np.int64(n_samples), *model.walk_args(p.seed, p.steps, every), np.float32(p.strike),
            p.kind is OptionKind.CALL, np.float32(p.rate), coeffs, np.float32(model.log_geometric),
            np.float32(model.total_weight), np.float32(model.control_mean), halving, p.antithetic)
    # a sample with its coarse twin: 1.5 walks' steps, 2 walks' normals; a pair twice that
    per_block = int(PATHS_PER_BLOCK * model.n * p.steps * (1.5 if halving else 1.0) * (2 if p.antithetic else 1))
    kernel = BlockKernel(width=PRICE_WIDTH, cpu=_cpu_sums, cuda_factory=_CUDA_SUMS,
                         cpu_chunk_blocks=max(1, CPU_CHUNK_ASSET_STEPS // per_block),
                         gpu_chunk_blocks=max(1, GPU_CHUNK_ASSET_STEPS // per_block))
    return sum_blocks(kernel, -(-n_samples // PATHS_PER_BLOCK), args, device, ctx)


def basket_values(p: BasketOptionParams, model: Model, n_paths: int, every: int, dates: int,
                  ctx: RunContext) -> tuple[np.ndarray, np.ndarray | None]:
    """Basket values ``(n_paths, dates)`` of regression paths (independent of the pricing paths) at each
    exercise date, and under Heston their aggregate variances there (same shape; None under GBM), walked on
    the host (a GPU job keeps them on the device: ``regression_states_on_device``)."""
    states = np.empty((n_paths, 2 * dates if model.heston else dates), dtype=np.float32)  # store_path's rows
    per_block = PATHS_PER_BLOCK * model.n * p.steps
    args = (np.int64(REGRESSION_STREAM), *model.walk_args(p.seed, p.steps, every))

    def compute(start: int, count: int) -> None:
        first = start * PATHS_PER_BLOCK
        _cpu_store(states[first:first + count * PATHS_PER_BLOCK], np.int64(first), *args)

    warm_up(compute, ctx, warm_key(_cpu_store, CPU, args))
    run_chunks(-(-n_paths // PATHS_PER_BLOCK), max(1, CPU_CHUNK_ASSET_STEPS // per_block), compute, ctx)
    return states[:, :dates], (states[:, dates:] if model.heston else None)


def regression_states_on_device(p: BasketOptionParams, model: Model, n_paths: int, every: int, dates: int,
                                ctx: RunContext) -> Any:
    """``basket_values`` on a GPU, left there as one float32 device array, date-major: row ``date`` holds
    every regression path's basket value at that date and, under Heston, row ``dates + date`` their
    aggregate variances. The backward induction (``kernels.lsm``) runs date by date over all paths on the
    device, so a date's row is read coalesced and the paths' ``4 x 2 x dates`` bytes never cross to the host
    (50 MB in the STAC-shaped case)."""
    from kernels import gpu

    states = gpu.empty((2 * dates if model.heston else dates, n_paths), np.float32)
    args = (np.int64(REGRESSION_STREAM), *model.walk_args(p.seed, p.steps, every))
    device_args = gpu.to_device_all(args)
    launch = _cuda_store_columns()

    def compute(start: int, count: int) -> None:
        first = start * PATHS_PER_BLOCK
        size = min(count * PATHS_PER_BLOCK, n_paths - first)
        launch[-(-size // gpu.THREADS), gpu.THREADS](states, np.int64(first), np.int64(size), *device_args)

    # the states are allocated whole above: a chunk only bounds a launch, as GPU_CHUNK_ASSET_STEPS does elsewhere
    per_block = PATHS_PER_BLOCK * model.n * p.steps
    warm_up(compute, ctx, warm_key(launch, GPU, args))
    run_chunks(-(-n_paths // PATHS_PER_BLOCK), max(1, GPU_CHUNK_ASSET_STEPS // per_block), compute, ctx)
    return states


def normal_table(seed: int, first_path: int, n_paths: int, normals: int) -> Any:
    """The first ``normals`` normals of pricing paths ``first_path .. first_path + n_paths`` on a GPU, exactly
    as ``_normal`` draws them, in a float32 device array: row ``k`` holds normal ``k`` of every path, so the
    consecutive paths of a warp read neighbouring entries. Generated once, it serves every revaluation of
    ``kernels.fd_greeks``, which walk the same paths on common random numbers."""
    from kernels import gpu

    draws = -(-normals // NORMALS_PER_DRAW)
    table = gpu.empty((draws * NORMALS_PER_DRAW, n_paths), np.float32)
    threads = draws * n_paths
    _cuda_normal_table()[-(-threads // gpu.THREADS), gpu.THREADS](table, np.int64(first_path), np.int64(n_paths),
                                                                   np.int64(seed))
    return table


@cache
def _cuda_normal_table() -> Any:
    # fastmath as the walks that draw these normals themselves are compiled, so the numbers are theirs
    @cuda.jit(fastmath=True)
    def kernel(table, first_path, n_paths, seed):  # type: ignore[no-untyped-def]
        i = cuda.grid(1)
        if i < (table.shape[0] // NORMALS_PER_DRAW) * n_paths:
            draw = i // n_paths
            column = i - draw * n_paths
            z0, z1, z2, z3 = normals4(first_path + column, draw, seed)
            row = draw * NORMALS_PER_DRAW
            table[row, column] = z0
            table[row + 1, column] = z1
            table[row + 2, column] = z2
            table[row + 3, column] = z3

    return kernel


def scheme(p: BasketOptionParams, sums: np.ndarray, n_paths: int, every: int, std_error: float) -> dict[str, Any]:
    """The summary's ``discretisation`` and, under Heston, ``discretisation_bias``: the step-halving estimate
    from the price kernel's ``d`` sums (``every`` steps between exercise dates), or why there is none."""
    if p.model is BasketModel.GBM:
        return {"discretisation": "exact (lognormal steps)"}
    if p.steps % 2 == 0 and not halving_possible(p, every):
        bias: dict[str, Any] = {
            "method": f"not estimated: {every} steps between exercise dates put every other date off the "
                      "coarse grid of the step-halving pair",
            "warning": "the discretisation bias is not bounded; use steps a multiple of 2 x exercise_dates"}
    else:
        dates = p.steps // every
        halved = f" and {dates // 2} against {dates} exercise dates" if every == 1 else ""
        bias = heston.discretisation_bias(float(sums[SUM_WIDTH]), float(sums[SUM_WIDTH + 1]), n_paths, p.steps,
                                          std_error, p.confidence, halved)
    return {"discretisation": heston.SCHEME, "discretisation_bias": bias}
