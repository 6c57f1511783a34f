"""Arithmetic-average Asian call/put under GBM, with the geometric-average option as control variate.

The average is over the ``steps`` prices at ``T*j/steps``, j = 1..steps. The same path's geometric
average gives an option whose price has a closed form (``closed_form.geometric_asian``); its discounted
payoff minus that price is the mean-zero control ``x``. Four paths share each generator call (counter =
(path group, step)), so a thread carries four paths through all steps with its state in registers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
from numba import njit, prange
from numba.core.extending import register_jitable

from kernels import estimators, path_greeks
from kernels.chunks import add_in_order
from kernels.closed_form import geometric_asian
from kernels.context import KernelResult, RunContext
from kernels.cuda_reduce import block_sums_kernel
from kernels.estimators import SUM_WIDTH, add_sample
from kernels.launch import BlockKernel, sum_blocks
from kernels.params import AsianOptionParams, OptionKind
from kernels.philox import NORMALS_PER_DRAW, box_muller, fill_words, normals4
from kernels.special import exp32

GROUPS_PER_BLOCK: Final = 1024  # 4 groups (16 paths) per GPU thread; each path runs all its steps
PATHS_PER_BLOCK: Final = GROUPS_PER_BLOCK * NORMALS_PER_DRAW
# Chunks are sized in path-steps so a long-dated, finely monitored option still yields often.
CPU_CHUNK_PATH_STEPS: Final = 2**24
GPU_CHUNK_PATH_STEPS: Final = 2**33
_ZERO: Final = np.float32(0.0)


@register_jitable
def _step(walk, sum_growth, sum_walk, z, drift_dt, vol_sqrt_dt):  # type: ignore[no-untyped-def]
    """Advance one path by one date: ``walk`` is log(S/S0); running sums of S/S0 and of the walk."""
    walk += drift_dt + vol_sqrt_dt * z
    return walk, sum_growth + exp32(walk), sum_walk + walk


@register_jitable
def _payoffs(sum_growth, sum_walk, steps, spot, strike, call, discount, geometric_price):  # type: ignore[no-untyped-def]
    """Discounted arithmetic-average payoff and centred geometric-average control of one path."""
    arithmetic = spot * sum_growth / steps
    geometric = spot * exp32(sum_walk / steps)
    if call:
        return discount * max(arithmetic - strike, _ZERO), discount * max(geometric - strike, _ZERO) - geometric_price
    return discount * max(strike - arithmetic, _ZERO), discount * max(strike - geometric, _ZERO) - geometric_price


@register_jitable
def asian_sums(first_group, n_groups, stride, n_paths, seed, steps,  # type: ignore[no-untyped-def]
               spot, drift_dt, vol_sqrt_dt, strike, call, discount, geometric_price):
    """Sums (y, y^2, x, x^2, xy) over the paths of groups ``first_group + i * stride``: the fused GPU path."""
    sums = (0.0, 0.0, 0.0, 0.0, 0.0)
    for i in range(n_groups):
        group = first_group + i * stride
        first = group * NORMALS_PER_DRAW
        if first >= n_paths:
            break
        w0 = w1 = w2 = w3 = e0 = e1 = e2 = e3 = s0 = s1 = s2 = s3 = _ZERO
        for step in range(steps):
            z0, z1, z2, z3 = normals4(group, step, seed)
            w0, e0, s0 = _step(w0, e0, s0, z0, drift_dt, vol_sqrt_dt)
            w1, e1, s1 = _step(w1, e1, s1, z1, drift_dt, vol_sqrt_dt)
            w2, e2, s2 = _step(w2, e2, s2, z2, drift_dt, vol_sqrt_dt)
            w3, e3, s3 = _step(w3, e3, s3, z3, drift_dt, vol_sqrt_dt)
        growths = (e0, e1, e2, e3)
        walks = (s0, s1, s2, s3)
        for lane in range(min(NORMALS_PER_DRAW, n_paths - first)):
            y, x = _payoffs(growths[lane], walks[lane], steps, spot, strike, call, discount, geometric_price)
            sums = add_sample(sums, y, x)
    return sums


@njit(parallel=True, cache=True, fastmath=True, error_model="numpy")
def _cpu_blocks(out, first_block, n_paths, seed, steps, spot, drift_dt, vol_sqrt_dt,  # type: ignore[no-untyped-def]
                strike, call, discount, geometric_price):
    # The GPU path's functions, reorganised so the work vectorises: for each date the generator fills
    # a block of words, then one straight loop moves every path of the block; the block's paths keep
    # their state in small arrays instead of registers.
    for b in prange(out.shape[0]):
        first_path = (first_block + b) * PATHS_PER_BLOCK
        valid = min(PATHS_PER_BLOCK, n_paths - first_path)
        groups = (valid + NORMALS_PER_DRAW - 1) // NORMALS_PER_DRAW
        words = np.empty(PATHS_PER_BLOCK, dtype=np.uint32)
        walk = np.zeros(PATHS_PER_BLOCK, dtype=np.float32)
        sum_growth = np.zeros(PATHS_PER_BLOCK, dtype=np.float32)
        sum_walk = np.zeros(PATHS_PER_BLOCK, dtype=np.float32)
        for step in range(steps):
            fill_words(words, first_path // NORMALS_PER_DRAW, groups, step, seed)
            for j in range(groups * NORMALS_PER_DRAW // 2):
                za, zb = box_muller(words[2 * j], words[2 * j + 1])
                walk[2 * j], sum_growth[2 * j], sum_walk[2 * j] = _step(
                    walk[2 * j], sum_growth[2 * j], sum_walk[2 * j], za, drift_dt, vol_sqrt_dt)
                walk[2 * j + 1], sum_growth[2 * j + 1], sum_walk[2 * j + 1] = _step(
                    walk[2 * j + 1], sum_growth[2 * j + 1], sum_walk[2 * j + 1], zb, drift_dt, vol_sqrt_dt)
        sums = (0.0, 0.0, 0.0, 0.0, 0.0)
        for p in range(valid):
            y, x = _payoffs(sum_growth[p], sum_walk[p], steps, spot, strike, call, discount, geometric_price)
            sums = add_sample(sums, y, x)
        for k in range(len(sums)):
            out[b, k] = sums[k]


_CUDA: Final = block_sums_kernel(asian_sums, width=SUM_WIDTH, items_per_block=GROUPS_PER_BLOCK)


def kernel_for(steps: int) -> BlockKernel:
    """The Asian kernel with chunk sizes for ``steps`` monitoring dates."""
    path_steps_per_block = PATHS_PER_BLOCK * steps
    return BlockKernel(
        width=estimators.SUM_WIDTH, cpu=_cpu_blocks, cuda_factory=_CUDA,
        cpu_chunk_blocks=max(1, CPU_CHUNK_PATH_STEPS // path_steps_per_block),
        gpu_chunk_blocks=max(1, GPU_CHUNK_PATH_STEPS // path_steps_per_block),
    )


def kernel_args(p: AsianOptionParams, n_paths: int) -> tuple[Any, ...]:
    """The scalar arguments both implementations take after ``(out, first_block)``."""
    dt = p.maturity / p.steps
    f32 = np.float32  # per-path math is single precision (log-prices relative to spot); sums are double
    return (np.int64(n_paths), np.int64(p.seed), np.int64(p.steps), f32(p.spot),
            f32((p.rate - p.dividend_yield - 0.5 * p.volatility**2) * dt), f32(p.volatility * math.sqrt(dt)),
            f32(p.strike), p.kind is OptionKind.CALL, f32(math.exp(-p.rate * p.maturity)), f32(_geometric(p)))


def _geometric(p: AsianOptionParams) -> float:
    """The control's known mean: the geometric-average option's closed-form price."""
    return geometric_asian(p.spot, p.strike, p.rate, p.volatility, p.maturity, p.steps, p.kind is OptionKind.CALL,
                           p.dividend_yield)


def block_count(p: AsianOptionParams) -> int:
    """Blocks of ``PATHS_PER_BLOCK`` paths the job takes (the unit a shard is made of)."""
    return -(-max(p.paths, 3) // PATHS_PER_BLOCK)


def shard_part(p: AsianOptionParams, device: str, ctx: RunContext, first: int, count: int) -> np.ndarray:
    """The five sums over blocks ``first .. first + count``: a whole job's, or one shard's (``kernels.shards``)."""
    return sum_blocks(kernel_for(p.steps), count, kernel_args(p, max(p.paths, 3)), device, ctx, first=first)


def price(p: AsianOptionParams, sums: np.ndarray) -> KernelResult:
    """The estimate, its error and the geometric-Asian price from the five sums over every block."""
    n_paths = max(p.paths, 3)
    # x = D (G - K)^+ - price: float32 terms of the size of the discounted strike and of the geometric average
    discounted_strike = p.strike * math.exp(-p.rate * p.maturity)
    estimate = estimators.from_sums(sums, n_paths, control_variate=p.control_variate, confidence=p.confidence,
                                    control_scale=2.0 * (_geometric(p) + discounted_strike))
    summary = {**estimate.as_dict(), "paths": n_paths, "steps": p.steps, "path_steps": n_paths * p.steps,
               "geometric_closed_form": _geometric(p)}
    return KernelResult(summary=summary, paths=n_paths)


def merge_parts(p: AsianOptionParams, parts: Sequence[np.ndarray]) -> KernelResult:
    """The job's result from its shards' sums (``kernels.shards``), added in block order as ``run`` adds chunks."""
    return price(p, add_in_order(parts))


def run(p: AsianOptionParams, device: str, ctx: RunContext) -> KernelResult:
    """Price the option; the summary carries the estimate, its error, and the geometric-Asian price."""
    # with Greeks a second pass walks the same paths again: each pass is half of the job's progress
    result = price(p, shard_part(p, device, ctx.part(0.0, 0.5) if p.greeks else ctx, 0, block_count(p)))
    if p.greeks:
        result.summary["greeks"] = path_greeks.estimate(
            max(p.paths, 3), p.seed, p.steps, False, spot=p.spot, strike=p.strike, rate=p.rate,
            dividend_yield=p.dividend_yield, volatility=p.volatility, maturity=p.maturity,
            call=p.kind is OptionKind.CALL, requested=p.greeks, confidence=p.confidence, device=device,
            ctx=ctx.part(0.5, 1.0))
    return result
