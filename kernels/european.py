"""European call/put under geometric Brownian motion: antithetic pairs and a terminal-price control.

One sample is one path, or with ``antithetic`` one pair of paths driven by ``z`` and ``-z`` whose payoffs
are averaged. The control is the discounted terminal price, whose expectation is today's spot, so
``x = e^{-rT} S_T - S_0`` has mean zero. The math is written once (``philox``, ``box_muller``, ``_sample``):
each CUDA thread runs it fused over every ``THREADS``-th group of a block (``european_sums``), the CPU
twin runs the same functions in two vectorisable passes per block. Nothing per path is written to
device memory: each block returns five sums (see ``kernels.estimators``).
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
from kernels.closed_form import black_scholes
from kernels.context import KernelResult, RunContext
from kernels.cuda_reduce import block_sums_kernel
from kernels.estimators import SUM_WIDTH, add_sample
from kernels.launch import BlockKernel, sum_blocks
from kernels.params import EuropeanOptionParams, OptionKind
from kernels.philox import NORMALS_PER_DRAW, box_muller, fill_words, normals4
from kernels.special import exp32

# Generator calls per block, and so samples per block: the unit random streams and partial sums are
# keyed by. 4096 calls = 16 per GPU thread, enough work to amortise the block's reduction.
GROUPS_PER_BLOCK: Final = 4096
SAMPLES_PER_BLOCK: Final = GROUPS_PER_BLOCK * NORMALS_PER_DRAW
CPU_CHUNK_BLOCKS: Final = 256  # ~4e6 samples, ~30 ms: long parallel regions, a cancel still felt at once
GPU_CHUNK_BLOCKS: Final = 16_384  # ~2.7e8 samples per launch: milliseconds on a data-centre GPU
CPU_RUN_PAIRS: Final = 128  # antithetic pairs per float32 partial sum in the CPU twin
CPU_BATCH_SAMPLES: Final = 4096  # samples generated at a time by the CPU twin (a multiple of 2 * CPU_RUN_PAIRS)
_ZERO: Final = np.float32(0.0)
_HALF: Final = np.float32(0.5)


@register_jitable
def _sample(z, forward, vol_sqrt_t, strike, discount, spot, call, antithetic):  # type: ignore[no-untyped-def]
    """Discounted payoff and centred control (float32) for one sample driven by the normal ``z``."""
    growth = exp32(vol_sqrt_t * z)
    up = forward * growth
    pay_up = max(up - strike, _ZERO) if call else max(strike - up, _ZERO)
    if not antithetic:
        return discount * pay_up, discount * up - spot
    down = forward / growth
    pay_down = max(down - strike, _ZERO) if call else max(strike - down, _ZERO)
    return _HALF * discount * (pay_up + pay_down), _HALF * discount * (up + down) - spot


@register_jitable
def european_sums(first_group, n_groups, stride, n_samples, seed,  # type: ignore[no-untyped-def]
                  forward, vol_sqrt_t, strike, discount, spot, call, antithetic):
    """Sums over the samples of groups ``first_group + i * stride``, i < n_groups: the fused GPU path.

    A thread's samples (``n_groups`` groups of four, 64 on a GPU) are summed in float32 and join the
    float64 sums once, as the CPU twin's runs of 256 samples do: float64 adds and float32-to-64 conversions
    per sample cost a GPU more than the sample's own math. A group's four normals are taken by name, not
    by a runtime index into the tuple, which would put the tuple in local memory.
    """
    r0 = r1 = r2 = r3 = r4 = _ZERO
    for i in range(n_groups):
        group = first_group + i * stride
        first = group * NORMALS_PER_DRAW
        if first >= n_samples:
            break
        z0, z1, z2, z3 = normals4(group, 0, seed)
        left = n_samples - first
        for lane in range(min(NORMALS_PER_DRAW, left)):
            z = z0 if lane == 0 else (z1 if lane == 1 else (z2 if lane == 2 else z3))
            y, x = _sample(z, forward, vol_sqrt_t, strike, discount, spot, call, antithetic)
            r0 += y
            r1 += y * y
            r2 += x
            r3 += x * x
            r4 += x * y
    return np.float64(r0), np.float64(r1), np.float64(r2), np.float64(r3), np.float64(r4)


@njit(parallel=True, cache=True, fastmath=True, error_model="numpy")
def _cpu_blocks(out, first_block, n_samples, seed, forward, vol_sqrt_t, strike, discount, spot,  # type: ignore[no-untyped-def]
                call, antithetic):
    # The same functions as the GPU path, in two vectorisable passes per block: the generator fills a
    # block of words, then Box-Muller, payoffs and sums run as one straight loop over pairs of words.
    for b in prange(out.shape[0]):
        first_sample = (first_block + b) * SAMPLES_PER_BLOCK
        valid = min(SAMPLES_PER_BLOCK, n_samples - first_sample)
        words = np.empty(CPU_BATCH_SAMPLES, dtype=np.uint32)
        sums = (0.0, 0.0, 0.0, 0.0, 0.0)
        for batch in range(0, valid, CPU_BATCH_SAMPLES):
            # a batch's words and the generator's counter arrays stay in the core's L1/L2 cache
            size = min(CPU_BATCH_SAMPLES, valid - batch)
            fill_words(words, (first_sample + batch) // NORMALS_PER_DRAW, -(-size // NORMALS_PER_DRAW), 0, seed)
            for run in range(0, size // 2, CPU_RUN_PAIRS):
                # float32 partial sums over a short run vectorise twice as wide; a run is short enough
                # (256 samples) that their rounding stays ~1e-7 relative, then it joins the float64 sums
                r0 = r1 = r2 = r3 = r4 = _ZERO
                for j in range(run, min(run + CPU_RUN_PAIRS, size // 2)):
                    za, zb = box_muller(words[2 * j], words[2 * j + 1])
                    ya, xa = _sample(za, forward, vol_sqrt_t, strike, discount, spot, call, antithetic)
                    yb, xb = _sample(zb, forward, vol_sqrt_t, strike, discount, spot, call, antithetic)
                    r0 += ya + yb
                    r1 += ya * ya + yb * yb
                    r2 += xa + xb
                    r3 += xa * xa + xb * xb
                    r4 += xa * ya + xb * yb
                sums = (sums[0] + r0, sums[1] + r1, sums[2] + r2, sums[3] + r3, sums[4] + r4)
        if valid % 2 == 1:  # only the last batch can be odd; its words are still in the buffer
            last = (valid - 1) % CPU_BATCH_SAMPLES
            za, _ = box_muller(words[last], words[last + 1])
            ya, xa = _sample(za, forward, vol_sqrt_t, strike, discount, spot, call, antithetic)
            sums = add_sample(sums, ya, xa)
        for k in range(len(sums)):
            out[b, k] = sums[k]


KERNEL: Final = BlockKernel(
    width=estimators.SUM_WIDTH, cpu=_cpu_blocks,
    cuda_factory=block_sums_kernel(european_sums, width=SUM_WIDTH, items_per_block=GROUPS_PER_BLOCK),
    cpu_chunk_blocks=CPU_CHUNK_BLOCKS, gpu_chunk_blocks=GPU_CHUNK_BLOCKS,
)


def kernel_args(p: EuropeanOptionParams, n_samples: int) -> tuple[Any, ...]:
    """The scalar arguments both implementations take after ``(out, first_block)``."""
    forward = p.spot * math.exp((p.rate - p.dividend_yield - 0.5 * p.volatility**2) * p.maturity)
    f32 = np.float32  # per-path math is single precision; the sums are double
    # the control's known mean: E[e^{-rT} S_T] = S_0 e^{-qT}
    return (np.int64(n_samples), np.int64(p.seed), f32(forward), f32(p.volatility * math.sqrt(p.maturity)),
            f32(p.strike), f32(math.exp(-p.rate * p.maturity)), f32(_discounted_forward(p)),
            p.kind is OptionKind.CALL, p.antithetic)


def _discounted_forward(p: EuropeanOptionParams) -> float:
    return p.spot * math.exp(-p.dividend_yield * p.maturity)


def samples_for(p: EuropeanOptionParams) -> int:
    """Samples needed for ``p.paths`` paths: pairs (rounded up) with antithetic variates."""
    return -(-p.paths // 2) if p.antithetic else p.paths


def block_count(p: EuropeanOptionParams) -> int:
    """Blocks of ``SAMPLES_PER_BLOCK`` samples the job's paths take (the unit a shard is made of)."""
    return -(-_sample_count(p) // SAMPLES_PER_BLOCK)


def _sample_count(p: EuropeanOptionParams) -> int:
    return max(samples_for(p), 3)


def shard_part(p: EuropeanOptionParams, device: str, ctx: RunContext, first: int, count: int) -> np.ndarray:
    """The five sums over blocks ``first .. first + count``: a whole job's, or one shard's (``kernels.shards``)."""
    return sum_blocks(KERNEL, count, kernel_args(p, _sample_count(p)), device, ctx, first=first)


def price(p: EuropeanOptionParams, sums: np.ndarray) -> KernelResult:
    """The estimate, its error and the Black-Scholes reference from the five sums over every block."""
    n_samples = _sample_count(p)
    # x = e^{-rT} S_T - S_0 e^{-qT}: two float32 terms of about the discounted forward each
    estimate = estimators.from_sums(sums, n_samples, control_variate=p.control_variate, confidence=p.confidence,
                                    control_scale=2.0 * _discounted_forward(p))
    paths = 2 * n_samples if p.antithetic else n_samples
    reference = black_scholes(p.spot, p.strike, p.rate, p.volatility, p.maturity, p.kind is OptionKind.CALL,
                              p.dividend_yield)
    return KernelResult(summary={**estimate.as_dict(), "paths": paths, "closed_form": reference}, paths=paths)


def merge_parts(p: EuropeanOptionParams, parts: Sequence[np.ndarray]) -> KernelResult:
    """The job's result from its shards' sums (``kernels.shards``), added in block order as ``run`` adds chunks."""
    return price(p, add_in_order(parts))


def run(p: EuropeanOptionParams, device: str, ctx: RunContext) -> KernelResult:
    """Price the option; the summary carries the estimate, its error, and the Black-Scholes reference."""
    # with Greeks a second pass walks the same paths again: each pass is half of the job's progress
    price_ctx = ctx.part(0.0, 0.5) if p.greeks else ctx
    result = price(p, shard_part(p, device, price_ctx, 0, block_count(p)))
    if p.greeks:
        result.summary["greeks"] = path_greeks.estimate(
            _sample_count(p), p.seed, 1, p.antithetic, spot=p.spot, strike=p.strike, rate=p.rate,
            dividend_yield=p.dividend_yield, volatility=p.volatility, maturity=p.maturity,
            call=p.kind is OptionKind.CALL, requested=p.greeks, confidence=p.confidence, device=device,
            ctx=ctx.part(0.5, 1.0))
    return result
