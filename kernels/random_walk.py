"""The platform's smoke-test random walk: every path averages ``steps`` float32 normals from numba's xoroshiro128+.

Kept bit-compatible with the textbook numba CUDA random walk (docs/kernels.md): path ``i`` uses state ``i`` of
``numba.cuda.random.create_xoroshiro128p_states(paths, seed)`` (the seed state jumped ``i`` times by 2**64)
and draws with ``xoroshiro128p_normal_float32``. Those numba functions are CPU-``jit`` functions that
numba also compiles for CUDA, so the CPU twin calls the very same code.

Each path makes its own state where it runs (``jumped_state``), on either device: the generator's state
update is linear over GF(2), so "jump ``i`` times" is the 128 x 128 bit matrix ``J^i``, the product of the
precomputed ``J^(2^k)`` over the set bits of ``i`` (``jump_table``). A path's state costs at most 64 x 128
conditional XORs instead of ``i`` sequential jumps of 128 generator steps each, made on the host one path
after another: on an H100 those host jumps were 95% of a 2,000,000-path walk's time.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Final

import numba
import numpy as np
from numba import njit, prange, uint64
from numba.core.extending import register_jitable
from numba.cuda import config as cuda_config
from numba.cuda.random import (
    init_xoroshiro128p_states_cpu,
    xoroshiro128p_dtype,
    xoroshiro128p_jump,
    xoroshiro128p_normal_float32,
)

from kernels import estimators
from kernels.context import KernelResult, RunContext
from kernels.cuda_reduce import block_sums_kernel
from kernels.launch import BlockKernel, sum_blocks
from kernels.params import RandomWalkParams

PATHS_PER_BLOCK: Final = 256  # one path per GPU thread, as in the seed; equals kernels.gpu.THREADS
WIDTH: Final = 2  # sum of path averages, sum of their squares
CPU_CHUNK_PATH_STEPS: Final = 2**24
GPU_CHUNK_PATH_STEPS: Final = 2**33
STATE_BITS: Final = 128
# Rows of ``jump_table``: J^(2^k) for k < JUMP_ROWS covers every path index below 2**JUMP_ROWS.
JUMP_ROWS: Final = 64
_ALL_ONES: Final = np.uint64(0xFFFFFFFFFFFFFFFF)


# Under the CUDA simulator numba's generator functions are object-mode; so must their callers be.
_SIMULATED: Final = bool(cuda_config.ENABLE_CUDASIM)
# numba's generator functions are jit functions without a disk cache: called from Python they compile in every
# new process (some 1.5 s of a fresh worker's warm-up). Called from the cached functions below, they are
# compiled into those functions' cache entries instead.
_cached_jit: Final = numba.jit(nopython=not _SIMULATED, forceobj=_SIMULATED, cache=not _SIMULATED)


@_cached_jit
def _seed_state(first, seed):  # type: ignore[no-untyped-def]
    """``first[0]``: the generator state of ``seed``, the state of path 0."""
    init_xoroshiro128p_states_cpu(first, seed, np.uint64(0))


@register_jitable
def _apply(table, k, s0, s1):  # type: ignore[no-untyped-def]
    """``J^(2^k)`` applied to the state ``(s0, s1)``: the XOR of the table's columns at the state's set bits
    (masks, not branches: the bits differ from thread to thread)."""
    r0 = uint64(0)
    r1 = uint64(0)
    for b in range(64):
        low = ((s0 >> uint64(b)) & uint64(1)) * _ALL_ONES
        high = ((s1 >> uint64(b)) & uint64(1)) * _ALL_ONES
        r0 ^= (table[k, b, 0] & low) ^ (table[k, 64 + b, 0] & high)
        r1 ^= (table[k, b, 1] & low) ^ (table[k, 64 + b, 1] & high)
    return r0, r1


@register_jitable
def jumped_state(state, path, seed0, seed1, table):  # type: ignore[no-untyped-def]
    """``state[0]`` = the seed state ``(seed0, seed1)`` jumped ``path`` times by 2**64 draws, as
    ``create_xoroshiro128p_states`` gives path ``path``: ``J^(2^k)`` (``table[k]``) for each set bit k."""
    s0 = seed0
    s1 = seed1
    rest = uint64(path)
    k = 0
    while rest:
        if rest & uint64(1):
            s0, s1 = _apply(table, k, s0, s1)
        rest >>= uint64(1)
        k += 1
    state[0]["s0"] = s0
    state[0]["s1"] = s1


@_cached_jit
def _fill_jump_table(table):  # type: ignore[no-untyped-def]
    """``table[k, b]`` = ``J^(2^k)`` applied to the unit state with bit ``b`` set (b < 64 in ``s0``)."""
    unit = np.empty(1, dtype=xoroshiro128p_dtype)
    for b in range(STATE_BITS):
        unit[0]["s0"] = uint64(1) << uint64(b) if b < 64 else uint64(0)
        unit[0]["s1"] = uint64(1) << uint64(b - 64) if b >= 64 else uint64(0)
        xoroshiro128p_jump(unit, 0)  # linear, with no constant: J e_b is column b of J
        table[0, b, 0] = unit[0]["s0"]
        table[0, b, 1] = unit[0]["s1"]
    for k in range(1, table.shape[0]):  # J^(2^k) = J^(2^(k-1)) J^(2^(k-1)), column by column
        for b in range(STATE_BITS):
            table[k, b, 0], table[k, b, 1] = _apply(table, k - 1, table[k - 1, b, 0], table[k - 1, b, 1])


@cache
def jump_table() -> np.ndarray:
    """``J^(2^k)`` for k < ``JUMP_ROWS`` as ``(JUMP_ROWS, 128, 2)`` uint64: row k, column b is the state
    ``J^(2^k) e_b`` (``s0``, ``s1``). The same for every seed; made once per process."""
    table = np.empty((JUMP_ROWS, STATE_BITS, 2), dtype=np.uint64)
    _fill_jump_table(table)
    return table


@register_jitable
def walk_sums(first_path, count, stride, n_paths, steps, seed0, seed1, table, state):  # type: ignore[no-untyped-def]
    """Sums (average, average^2) of the walks of paths ``first_path + i * stride``, i < count, each from its own
    jumped state in the one-state scratch ``state`` (both devices run this)."""
    total = 0.0
    total_sq = 0.0
    for i in range(count):
        path = first_path + i * stride
        if path >= n_paths:
            break
        jumped_state(state, path, seed0, seed1, table)
        walk = np.float32(0.0)
        for _ in range(steps):
            walk += xoroshiro128p_normal_float32(state, 0)
        average = np.float64(walk / np.float32(steps))
        total += average
        total_sq += average * average
    return total, total_sq


@njit(parallel=True, cache=True)
def _cpu_blocks(out, first_block, n_paths, steps, seed0, seed1, table):  # type: ignore[no-untyped-def]
    for b in prange(out.shape[0]):
        state = np.empty(1, dtype=xoroshiro128p_dtype)
        out[b, 0], out[b, 1] = walk_sums((first_block + b) * PATHS_PER_BLOCK, PATHS_PER_BLOCK, 1, n_paths, steps,
                                         seed0, seed1, table, state)


# Not fastmath: the CPU twin is not, and the walk must match numba's textbook kernel (docs/kernels.md).
_CUDA: Final = block_sums_kernel(walk_sums, width=WIDTH, items_per_block=PATHS_PER_BLOCK, scratch=1,
                                 scratch_dtype=xoroshiro128p_dtype, fastmath=False)


def run(p: RandomWalkParams, device: str, ctx: RunContext) -> KernelResult:
    """Mean of the paths' averages (zero in expectation) and their spread (``1/sqrt(steps)`` expected)."""
    n_paths = max(p.paths, 3)
    n_blocks = -(-n_paths // PATHS_PER_BLOCK)
    path_steps_per_block = PATHS_PER_BLOCK * p.steps
    kernel = BlockKernel(
        width=WIDTH, cpu=_cpu_blocks, cuda_factory=_CUDA,
        cpu_chunk_blocks=max(1, CPU_CHUNK_PATH_STEPS // path_steps_per_block),
        gpu_chunk_blocks=max(1, GPU_CHUNK_PATH_STEPS // path_steps_per_block),
    )
    seed = np.empty(1, dtype=xoroshiro128p_dtype)
    _seed_state(seed, np.uint64(p.seed))
    table = np.ascontiguousarray(jump_table()[:max(1, (n_paths - 1).bit_length())])
    args = (np.int64(n_paths), np.int64(p.steps), seed[0]["s0"], seed[0]["s1"], table)
    total, total_sq = sum_blocks(kernel, n_blocks, args, device, ctx)
    variance = max((total_sq - total * total / n_paths) / (n_paths - 1), 0.0)
    estimate = estimators.interval(total / n_paths, math.sqrt(variance / n_paths), n_paths, p.confidence)
    summary = {**estimate.as_dict(), "paths": n_paths, "steps": p.steps, "path_steps": n_paths * p.steps,
               "path_average_std": math.sqrt(variance), "expected_path_average_std": 1.0 / math.sqrt(p.steps)}
    return KernelResult(summary=summary, paths=n_paths)
