"""Arithmetic-average Asian call/put under GBM, with the geometric-average option as control variate.

The average is over the ``steps`` prices at ``T*j/steps``, j = 1..steps. The same path's geometric
average gives an option whose price has a closed form (``closed_form.geometric_asian``); its discounted
payoff minus that price is the mean-zero control ``x``. Four paths share each generator call (counter =
(path group, step)), so a thread carries four paths through all steps with its state in registers.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any, Final

import numpy as np
from numba import cuda, njit, prange  # numba.cuda imports without a GPU; kernels compile at first launch
from numba.core.extending import register_jitable

from kernels import estimators
from kernels.closed_form import geometric_asian
from kernels.context import KernelResult, RunContext
from kernels.estimators import SUM_WIDTH
from kernels.launch import BlockKernel, sum_blocks
from kernels.params import AsianOptionParams, OptionKind
from kernels.philox import NORMALS_PER_DRAW, normals4

GROUPS_PER_BLOCK: Final = 1024  # 4 groups (16 paths) per GPU thread; each path runs all its steps
PATHS_PER_BLOCK: Final = GROUPS_PER_BLOCK * NORMALS_PER_DRAW
# Chunks are sized in path-steps so a long-dated, finely monitored option still yields often.
CPU_CHUNK_PATH_STEPS: Final = 2**24
GPU_CHUNK_PATH_STEPS: Final = 2**33


@register_jitable
def _payoffs(sum_s, sum_log, steps, strike, call, discount, geometric_price):  # type: ignore[no-untyped-def]
    """Discounted arithmetic-average payoff and centred geometric-average control of one path."""
    arithmetic = sum_s / steps
    geometric = math.exp(sum_log / steps)
    if call:
        return discount * max(arithmetic - strike, 0.0), discount * max(geometric - strike, 0.0) - geometric_price
    return discount * max(strike - arithmetic, 0.0), discount * max(strike - geometric, 0.0) - geometric_price


@register_jitable
def asian_sums(first_group, n_groups, stride, n_paths, seed, steps,  # type: ignore[no-untyped-def]
               log_spot, drift_dt, vol_sqrt_dt, strike, call, discount, geometric_price):
    """Sums (y, y^2, x, x^2, xy) over the paths of groups ``first_group + i * stride``, i < n_groups."""
    sy = syy = sx = sxx = sxy = 0.0
    for i in range(n_groups):
        group = first_group + i * stride
        first = group * NORMALS_PER_DRAW
        if first >= n_paths:
            break
        l0 = l1 = l2 = l3 = log_spot
        a0 = a1 = a2 = a3 = 0.0  # running sums of prices
        g0 = g1 = g2 = g3 = 0.0  # running sums of log prices
        for step in range(steps):
            z0, z1, z2, z3 = normals4(group, step, seed)
            l0 += drift_dt + vol_sqrt_dt * z0
            l1 += drift_dt + vol_sqrt_dt * z1
            l2 += drift_dt + vol_sqrt_dt * z2
            l3 += drift_dt + vol_sqrt_dt * z3
            a0 += math.exp(l0)
            a1 += math.exp(l1)
            a2 += math.exp(l2)
            a3 += math.exp(l3)
            g0 += l0
            g1 += l1
            g2 += l2
            g3 += l3
        sums_s = (a0, a1, a2, a3)
        sums_log = (g0, g1, g2, g3)
        for lane in range(min(NORMALS_PER_DRAW, n_paths - first)):
            y, x = _payoffs(sums_s[lane], sums_log[lane], steps, strike, call, discount, geometric_price)
            sy += y
            syy += y * y
            sx += x
            sxx += x * x
            sxy += x * y
    return sy, syy, sx, sxx, sxy


@njit(parallel=True, cache=True)
def _cpu_blocks(out, first_block, n_paths, seed, steps, log_spot, drift_dt, vol_sqrt_dt,  # type: ignore[no-untyped-def]
                strike, call, discount, geometric_price):
    for b in prange(out.shape[0]):
        sums = asian_sums((first_block + b) * GROUPS_PER_BLOCK, GROUPS_PER_BLOCK, 1, n_paths, seed, steps,
                          log_spot, drift_dt, vol_sqrt_dt, strike, call, discount, geometric_price)
        for k in range(len(sums)):
            out[b, k] = sums[k]


@cache
def _cuda_kernel() -> Any:
    from numba import float64

    from kernels.gpu import THREADS, block_reduce_store

    per_thread = GROUPS_PER_BLOCK // THREADS

    @cuda.jit
    def kernel(out, first_block, n_paths, seed, steps, log_spot, drift_dt, vol_sqrt_dt,  # type: ignore[no-untyped-def]
               strike, call, discount, geometric_price):
        shared = cuda.shared.array((SUM_WIDTH, THREADS), float64)
        tid = cuda.threadIdx.x
        first_group = (first_block + cuda.blockIdx.x) * GROUPS_PER_BLOCK + tid
        sums = asian_sums(first_group, per_thread, THREADS, n_paths, seed, steps,
                          log_spot, drift_dt, vol_sqrt_dt, strike, call, discount, geometric_price)
        for k in range(len(sums)):
            shared[k, tid] = sums[k]
        block_reduce_store(shared, out, cuda.blockIdx.x)

    return kernel


def kernel_for(steps: int) -> BlockKernel:
    """The Asian kernel with chunk sizes for ``steps`` monitoring dates."""
    path_steps_per_block = PATHS_PER_BLOCK * steps
    return BlockKernel(
        width=estimators.SUM_WIDTH, cpu=_cpu_blocks, cuda_factory=_cuda_kernel,
        cpu_chunk_blocks=max(1, CPU_CHUNK_PATH_STEPS // path_steps_per_block),
        gpu_chunk_blocks=max(1, GPU_CHUNK_PATH_STEPS // path_steps_per_block),
    )


def kernel_args(p: AsianOptionParams, n_paths: int) -> tuple[Any, ...]:
    """The scalar arguments both implementations take after ``(out, first_block)``."""
    dt = p.maturity / p.steps
    call = p.kind is OptionKind.CALL
    geometric = geometric_asian(p.spot, p.strike, p.rate, p.volatility, p.maturity, p.steps, call)
    return (np.int64(n_paths), np.int64(p.seed), np.int64(p.steps), math.log(p.spot),
            (p.rate - 0.5 * p.volatility**2) * dt, p.volatility * math.sqrt(dt), p.strike, call,
            math.exp(-p.rate * p.maturity), geometric)


def run(p: AsianOptionParams, device: str, ctx: RunContext) -> KernelResult:
    """Price the option; the summary carries the estimate, its error, and the geometric-Asian price."""
    n_paths = max(p.paths, 3)
    n_blocks = -(-n_paths // PATHS_PER_BLOCK)
    args = kernel_args(p, n_paths)
    sums = sum_blocks(kernel_for(p.steps), n_blocks, args, device, ctx)
    estimate = estimators.from_sums(sums, n_paths, control_variate=p.control_variate)
    summary = {**estimate.as_dict(), "paths": n_paths, "steps": p.steps, "path_steps": n_paths * p.steps,
               "geometric_closed_form": args[-1]}
    return KernelResult(summary=summary, paths=n_paths)
