"""Greeks of European and arithmetic-average Asian options under GBM, estimated path by path.

A path is monitored at ``m`` equally spaced dates ``t_j = T j / m`` (``m = 1``: a European option) and
pays ``f(A)`` with ``A`` the average of ``S_{t_j}``. With ``w_j = log(S_j / S_0)`` a thread keeps, per
path, ``sum e^{w_j}``, ``sum e^{w_j} w_j`` and ``sum e^{w_j} t_j``: every Greek below is a function of
those three sums, the first normal and the payoff, so one pass over the steps gives all five:

- delta, vega, rho, theta: **pathwise** derivatives of the discounted payoff (the payoff is Lipschitz
  and a.s. differentiable): ``delta = D f'(A) A / S_0``; ``vega = D f'(A) (1/m) sum S_j (W_j - sigma t_j)``;
  ``rho = -T D f(A) + D f'(A) (1/m) sum S_j t_j``; theta is ``-dV/dT`` with the dates scaling with ``T``.
- gamma: **likelihood ratio on top of the pathwise delta** (``f'`` is a step, so no second pathwise
  derivative exists): ``gamma = D f'(A) (A / S_0^2) (z_1 / (sigma sqrt(dt)) - 1)``, ``z_1`` the first step's
  normal (the only one whose density depends on ``S_0``).

The paths are the price kernel's own (the same counters), so price and Greeks share their random
numbers. Per-path math is float32; each block returns ``(sum g, sum g^2)`` for the five Greeks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

import numpy as np
from numba import njit, prange
from numba.core.extending import register_jitable

from kernels import estimators
from kernels.context import RunContext
from kernels.cuda_reduce import block_sums_kernel
from kernels.launch import BlockKernel, sum_blocks
from kernels.params import Greek
from kernels.philox import NORMALS_PER_DRAW, normals4
from kernels.special import exp32

GREEKS: Final = (Greek.DELTA, Greek.GAMMA, Greek.VEGA, Greek.RHO, Greek.THETA)  # order of the sums
WIDTH: Final = 2 * len(GREEKS)  # sum g and sum g^2 per Greek
METHOD: Final = {
    Greek.DELTA: "pathwise", Greek.GAMMA: "likelihood ratio x pathwise", Greek.VEGA: "pathwise",
    Greek.RHO: "pathwise", Greek.THETA: "pathwise",
}
GROUPS_PER_BLOCK: Final = 1024  # 4 groups (16 samples) per GPU thread
SAMPLES_PER_BLOCK: Final = GROUPS_PER_BLOCK * NORMALS_PER_DRAW
CPU_CHUNK_PATH_STEPS: Final = 2**23
GPU_CHUNK_PATH_STEPS: Final = 2**32
_ZERO: Final = np.float32(0.0)
_ONE: Final = np.float32(1.0)
_HALF: Final = np.float32(0.5)
_ZEROS5: Final = (_ZERO, _ZERO, _ZERO, _ZERO, _ZERO)


@register_jitable
def _advance(state, z, drift_dt, vol_sqrt_dt, t):  # type: ignore[no-untyped-def]
    """One date later: (w, sum e^w, sum e^w w, sum e^w t) of a path after the normal ``z``."""
    w, growth, weighted, timed = state
    w = w + drift_dt + vol_sqrt_dt * z
    e = exp32(w)
    return w, growth + e, weighted + e * w, timed + e * t


@register_jitable
def _lane_greeks(state, z1, m, spot, strike, call, discount, rate, mu, vol, vol_sqrt_dt, maturity):  # type: ignore[no-untyped-def]
    """Discounted delta, gamma, vega, rho, theta of one path (float32), from its sums and first normal."""
    _, growth, weighted, timed = state
    average = spot * growth / m
    itm = average > strike if call else average < strike
    if not itm:
        return _ZEROS5
    slope = discount if call else -discount  # D f'(A)
    value = slope * (average - strike)  # D f(A) > 0
    per_date = slope * spot / m
    delta = slope * average / spot
    gamma = delta / spot * (z1 / vol_sqrt_dt - _ONE)
    vega = per_date * (weighted - (mu + vol * vol) * timed) / vol
    rho = per_date * timed - maturity * value
    theta = rate * value - per_date * (weighted + mu * timed) * _HALF / maturity
    return delta, gamma, vega, rho, theta


@register_jitable
def add_greeks(sums, g):  # type: ignore[no-untyped-def]
    """``sums`` (g_k, g_k^2 interleaved) with one more sample, in float64."""
    d, c, v, r, t = np.float64(g[0]), np.float64(g[1]), np.float64(g[2]), np.float64(g[3]), np.float64(g[4])
    return (sums[0] + d, sums[1] + d * d, sums[2] + c, sums[3] + c * c, sums[4] + v, sums[5] + v * v,
            sums[6] + r, sums[7] + r * r, sums[8] + t, sums[9] + t * t)


@register_jitable
def _mean2(a, b):  # type: ignore[no-untyped-def]
    return ((a[0] + b[0]) * _HALF, (a[1] + b[1]) * _HALF, (a[2] + b[2]) * _HALF, (a[3] + b[3]) * _HALF,
            (a[4] + b[4]) * _HALF)


@register_jitable
def _group_greeks(group, seed, steps, sign, spot, strike, call, discount, rate, mu, vol, drift_dt,  # type: ignore[no-untyped-def]
                  vol_sqrt_dt, dt, maturity):
    """Greeks of the four paths of ``group``, driven by ``sign`` times their normals (-1: antithetic)."""
    s0 = s1 = s2 = s3 = (_ZERO, _ZERO, _ZERO, _ZERO)
    f0 = f1 = f2 = f3 = _ZERO
    for step in range(steps):
        z0, z1, z2, z3 = normals4(group, step, seed)
        z0, z1, z2, z3 = sign * z0, sign * z1, sign * z2, sign * z3
        if step == 0:
            f0, f1, f2, f3 = z0, z1, z2, z3
        t = np.float32(step + 1) * dt
        s0 = _advance(s0, z0, drift_dt, vol_sqrt_dt, t)
        s1 = _advance(s1, z1, drift_dt, vol_sqrt_dt, t)
        s2 = _advance(s2, z2, drift_dt, vol_sqrt_dt, t)
        s3 = _advance(s3, z3, drift_dt, vol_sqrt_dt, t)
    m = np.float32(steps)
    return (_lane_greeks(s0, f0, m, spot, strike, call, discount, rate, mu, vol, vol_sqrt_dt, maturity),
            _lane_greeks(s1, f1, m, spot, strike, call, discount, rate, mu, vol, vol_sqrt_dt, maturity),
            _lane_greeks(s2, f2, m, spot, strike, call, discount, rate, mu, vol, vol_sqrt_dt, maturity),
            _lane_greeks(s3, f3, m, spot, strike, call, discount, rate, mu, vol, vol_sqrt_dt, maturity))


@register_jitable
def greek_sums(first_group, n_groups, stride, n_samples, seed, steps, antithetic, spot, strike, call,  # type: ignore[no-untyped-def]
               discount, rate, mu, vol, drift_dt, vol_sqrt_dt, dt, maturity):
    """Sums over the samples of groups ``first_group + i * stride``, i < n_groups (both devices run this)."""
    sums = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    for i in range(n_groups):
        group = first_group + i * stride
        first = group * NORMALS_PER_DRAW
        if first >= n_samples:
            break
        lanes = _group_greeks(group, seed, steps, _ONE, spot, strike, call, discount, rate, mu, vol,
                              drift_dt, vol_sqrt_dt, dt, maturity)
        if antithetic:
            mirror = _group_greeks(group, seed, steps, -_ONE, spot, strike, call, discount, rate, mu, vol,
                                   drift_dt, vol_sqrt_dt, dt, maturity)
            lanes = (_mean2(lanes[0], mirror[0]), _mean2(lanes[1], mirror[1]), _mean2(lanes[2], mirror[2]),
                     _mean2(lanes[3], mirror[3]))
        for lane in range(min(NORMALS_PER_DRAW, n_samples - first)):
            sums = add_greeks(sums, lanes[lane])
    return sums


@njit(parallel=True, cache=True, fastmath=True, error_model="numpy")
def _cpu_blocks(out, first_block, n_samples, seed, steps, antithetic, spot, strike, call, discount, rate,  # type: ignore[no-untyped-def]
                mu, vol, drift_dt, vol_sqrt_dt, dt, maturity):
    for b in prange(out.shape[0]):
        sums = greek_sums((first_block + b) * GROUPS_PER_BLOCK, GROUPS_PER_BLOCK, 1, n_samples, seed, steps,
                          antithetic, spot, strike, call, discount, rate, mu, vol, drift_dt, vol_sqrt_dt, dt,
                          maturity)
        for k in range(len(sums)):
            out[b, k] = sums[k]


_CUDA: Final = block_sums_kernel(greek_sums, width=WIDTH, items_per_block=GROUPS_PER_BLOCK)


def estimate(n_samples: int, seed: int, steps: int, antithetic: bool, *, spot: float, strike: float, rate: float,
             dividend_yield: float, volatility: float, maturity: float, call: bool, requested: list[Greek],
             confidence: float, device: str, ctx: RunContext) -> dict[str, Any]:
    """The ``requested`` Greeks, each ``{estimate, std_error, ci_low, ci_high, confidence, method}``."""
    dt = maturity / steps
    mu = rate - dividend_yield - 0.5 * volatility**2
    f32 = np.float32
    args = (np.int64(n_samples), np.int64(seed), np.int64(steps), antithetic, f32(spot), f32(strike), call,
            f32(math.exp(-rate * maturity)), f32(rate), f32(mu), f32(volatility), f32(mu * dt),
            f32(volatility * math.sqrt(dt)), f32(dt), f32(maturity))
    per_block = SAMPLES_PER_BLOCK * steps * (2 if antithetic else 1)
    kernel = BlockKernel(width=WIDTH, cpu=_cpu_blocks, cuda_factory=_CUDA,
                         cpu_chunk_blocks=max(1, CPU_CHUNK_PATH_STEPS // per_block),
                         gpu_chunk_blocks=max(1, GPU_CHUNK_PATH_STEPS // per_block))
    sums = sum_blocks(kernel, -(-n_samples // SAMPLES_PER_BLOCK), args, device, ctx)
    return summarise(sums, n_samples, requested, confidence)


def summarise(sums: np.ndarray, n: int, requested: list[Greek], confidence: float,
              methods: dict[Greek, str] = METHOD, bump_errors: Mapping[Greek, float] | None = None) -> dict[str, Any]:
    """Plain Monte Carlo estimates of the ``requested`` Greeks from a kernel's ``(sum g, sum g^2)`` pairs.

    Each interval is widened by the float32 rounding bound, as a price's is (``estimators.from_sums``):
    ``FLOAT32_SAMPLE_ERROR`` times the samples' root mean square (which bounds their mean size), plus,
    for a finite-difference Greek, ``bump_errors[greek]`` (relative) times the estimate. Where the
    samples barely vary (an at-the-money European rho on antithetic pairs) the standard error is ~1e-8 and
    only this bound keeps the truth inside the interval.
    """
    out: dict[str, Any] = {}
    for k, greek in enumerate(GREEKS):
        if greek not in requested:
            continue
        total, squares = float(sums[2 * k]), float(sums[2 * k + 1])
        mean = total / n
        variance = max((squares - total * total / n) / (n - 1), 0.0)
        rounding = (estimators.rounding_bound(math.sqrt(max(squares, 0.0) / n))
                    + (bump_errors or {}).get(greek, 0.0) * abs(mean))
        value = estimators.interval(mean, math.sqrt(variance / n), n, confidence, rounding)
        out[greek.value] = {**value.as_dict(), "method": methods[greek]}
    return out
