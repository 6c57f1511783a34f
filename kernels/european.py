"""European call/put under geometric Brownian motion: antithetic pairs and a terminal-price control.

One sample is one path, or with ``antithetic`` one pair of paths driven by ``z`` and ``-z`` whose payoffs
are averaged. The control is the discounted terminal price, whose expectation is today's spot, so
``x = e^{-rT} S_T - S_0`` has mean zero. ``european_sums`` is the math, written once: the CPU twin runs it
with stride 1 over a whole block, each CUDA thread runs it over every ``THREADS``-th group of a block.
Nothing per path is written to memory: each block returns five sums (see ``kernels.estimators``).
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any, Final

import numpy as np
from numba import njit, prange
from numba.core.extending import register_jitable

from kernels import estimators
from kernels.closed_form import black_scholes
from kernels.context import KernelResult, RunContext
from kernels.launch import BlockKernel, sum_blocks
from kernels.params import EuropeanOptionParams, OptionKind
from kernels.philox import NORMALS_PER_DRAW, normals4

# Generator calls per block, and so samples per block: the unit random streams and partial sums are
# keyed by. 4096 calls = 16 per GPU thread, enough work to amortise the block's reduction.
GROUPS_PER_BLOCK: Final = 4096
SAMPLES_PER_BLOCK: Final = GROUPS_PER_BLOCK * NORMALS_PER_DRAW
CPU_CHUNK_BLOCKS: Final = 64  # ~1e6 samples: a cancel is noticed within tens of milliseconds
GPU_CHUNK_BLOCKS: Final = 16_384  # ~2.7e8 samples per launch: milliseconds on a data-centre GPU


@register_jitable
def _sample(z, forward, vol_sqrt_t, strike, discount, spot, call, antithetic):  # type: ignore[no-untyped-def]
    """Discounted payoff and centred control for one sample driven by the normal ``z``."""
    growth = math.exp(vol_sqrt_t * z)
    up = forward * growth
    pay_up = max(up - strike, 0.0) if call else max(strike - up, 0.0)
    if not antithetic:
        return discount * pay_up, discount * up - spot
    down = forward / growth
    pay_down = max(down - strike, 0.0) if call else max(strike - down, 0.0)
    return 0.5 * discount * (pay_up + pay_down), 0.5 * discount * (up + down) - spot


@register_jitable
def european_sums(first_group, n_groups, stride, n_samples, seed,  # type: ignore[no-untyped-def]
                  forward, vol_sqrt_t, strike, discount, spot, call, antithetic):
    """Sums (y, y^2, x, x^2, xy) over the samples of groups ``first_group + i * stride``, i < n_groups."""
    sy = syy = sx = sxx = sxy = 0.0
    for i in range(n_groups):
        group = first_group + i * stride
        first = group * NORMALS_PER_DRAW
        if first >= n_samples:
            break
        zs = normals4(group, 0, seed)
        for lane in range(min(NORMALS_PER_DRAW, n_samples - first)):
            y, x = _sample(zs[lane], forward, vol_sqrt_t, strike, discount, spot, call, antithetic)
            sy += y
            syy += y * y
            sx += x
            sxx += x * x
            sxy += x * y
    return sy, syy, sx, sxx, sxy


@njit(parallel=True, cache=True)
def _cpu_blocks(out, first_block, n_samples, seed, forward, vol_sqrt_t, strike, discount, spot,  # type: ignore[no-untyped-def]
                call, antithetic):
    for b in prange(out.shape[0]):
        sums = european_sums((first_block + b) * GROUPS_PER_BLOCK, GROUPS_PER_BLOCK, 1, n_samples, seed,
                             forward, vol_sqrt_t, strike, discount, spot, call, antithetic)
        for k in range(len(sums)):
            out[b, k] = sums[k]


@cache
def _cuda_kernel() -> Any:
    from numba import cuda, float64

    from kernels.gpu import THREADS, block_reduce_store

    per_thread = GROUPS_PER_BLOCK // THREADS

    @cuda.jit
    def kernel(out, first_block, n_samples, seed, forward, vol_sqrt_t, strike, discount, spot,  # type: ignore[no-untyped-def]
               call, antithetic):
        shared = cuda.shared.array((estimators.SUM_WIDTH, THREADS), float64)
        tid = cuda.threadIdx.x
        first_group = (first_block + cuda.blockIdx.x) * GROUPS_PER_BLOCK + tid
        sums = european_sums(first_group, per_thread, THREADS, n_samples, seed,
                             forward, vol_sqrt_t, strike, discount, spot, call, antithetic)
        for k in range(len(sums)):
            shared[k, tid] = sums[k]
        block_reduce_store(shared, out, cuda.blockIdx.x)

    return kernel


KERNEL: Final = BlockKernel(
    width=estimators.SUM_WIDTH, cpu=_cpu_blocks, cuda_factory=_cuda_kernel,
    cpu_chunk_blocks=CPU_CHUNK_BLOCKS, gpu_chunk_blocks=GPU_CHUNK_BLOCKS,
)


def kernel_args(p: EuropeanOptionParams, n_samples: int) -> tuple[Any, ...]:
    """The scalar arguments both implementations take after ``(out, first_block)``."""
    forward = p.spot * math.exp((p.rate - 0.5 * p.volatility**2) * p.maturity)
    return (np.int64(n_samples), np.int64(p.seed), forward, p.volatility * math.sqrt(p.maturity), p.strike,
            math.exp(-p.rate * p.maturity), p.spot, p.kind is OptionKind.CALL, p.antithetic)


def samples_for(p: EuropeanOptionParams) -> int:
    """Samples needed for ``p.paths`` paths: pairs (rounded up) with antithetic variates."""
    return -(-p.paths // 2) if p.antithetic else p.paths


def run(p: EuropeanOptionParams, device: str, ctx: RunContext) -> KernelResult:
    """Price the option; the summary carries the estimate, its error, and the Black-Scholes reference."""
    n_samples = max(samples_for(p), 3)
    n_blocks = -(-n_samples // SAMPLES_PER_BLOCK)
    sums = sum_blocks(KERNEL, n_blocks, kernel_args(p, n_samples), device, ctx)
    estimate = estimators.from_sums(sums, n_samples, control_variate=p.control_variate)
    paths = 2 * n_samples if p.antithetic else n_samples
    reference = black_scholes(p.spot, p.strike, p.rate, p.volatility, p.maturity, p.kind is OptionKind.CALL)
    summary = {**estimate.as_dict(), "paths": paths, "closed_form": reference}
    return KernelResult(summary=summary, paths=paths)
