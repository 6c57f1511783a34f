"""The platform's smoke-test random walk: every path averages ``steps`` float32 normals from numba's xoroshiro128+.

Kept bit-compatible with the textbook numba CUDA random walk (docs/kernels.md): path ``i`` uses state ``i`` of
``numba.cuda.random.create_xoroshiro128p_states(paths, seed)`` (the seed state jumped ``i`` times by 2**64)
and draws with ``xoroshiro128p_normal_float32``. Those numba functions are CPU-``jit`` functions that
numba also compiles for CUDA, so the CPU twin calls the very same code. States are made per chunk,
resuming from where the previous chunk ended; each path's stream depends only on its index.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numba
import numpy as np
from numba import njit, prange
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


@_cached_jit
def _fill_states(states, first):  # type: ignore[no-untyped-def]
    """``states[0] = first[0]``, each next state jumped 2**64 draws ahead of the one before."""
    states[0] = first[0]
    for i in range(1, states.shape[0]):
        states[i] = states[i - 1]
        xoroshiro128p_jump(states, i)


@_cached_jit
def _jump(states):  # type: ignore[no-untyped-def]
    """``states[0]`` jumped 2**64 draws ahead."""
    xoroshiro128p_jump(states, 0)


class StateChain:
    """Generator states for any chunk of paths, made in order from the chunk before it."""

    def __init__(self, seed: int) -> None:
        first = np.empty(1, dtype=xoroshiro128p_dtype)
        _seed_state(first, np.uint64(seed))
        self._next = {0: first}  # first path of a chunk -> its state; a retried chunk finds its start

    def states(self, first_path: int, count: int) -> np.ndarray:
        """States of paths ``first_path .. first_path + count``; ``first_path`` must start or end a chunk."""
        states = np.empty(count, dtype=xoroshiro128p_dtype)
        _fill_states(states, self._next[first_path])
        following = states[-1:].copy()
        _jump(following)
        self._next[first_path + count] = following
        return states


@register_jitable
def walk_sums(first_path, count, stride, n_paths, steps, states, chunk_first_path):  # type: ignore[no-untyped-def]
    """Sums (average, average^2) of the walks of paths ``first_path + i * stride``, i < count; ``states`` are
    the chunk's, which starts at ``chunk_first_path`` (both devices run this)."""
    total = 0.0
    total_sq = 0.0
    for i in range(count):
        path = first_path + i * stride
        if path >= n_paths:
            break
        walk = np.float32(0.0)
        for _ in range(steps):
            walk += xoroshiro128p_normal_float32(states, path - chunk_first_path)
        average = np.float64(walk / np.float32(steps))
        total += average
        total_sq += average * average
    return total, total_sq


@njit(parallel=True, cache=True)
def _cpu_blocks(out, first_block, n_paths, steps, states, chunk_first_path):  # type: ignore[no-untyped-def]
    for b in prange(out.shape[0]):
        out[b, 0], out[b, 1] = walk_sums((first_block + b) * PATHS_PER_BLOCK, PATHS_PER_BLOCK, 1, n_paths, steps,
                                         states, chunk_first_path)


# Not fastmath: the CPU twin is not, and the walk must match numba's textbook kernel (docs/kernels.md).
_CUDA: Final = block_sums_kernel(walk_sums, width=WIDTH, items_per_block=PATHS_PER_BLOCK, fastmath=False)


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
    chain = StateChain(p.seed)

    def chunk_args(first_block: int, count: int) -> tuple[Any, ...]:
        first = first_block * PATHS_PER_BLOCK
        states = chain.states(first, min(count * PATHS_PER_BLOCK, n_paths - first))
        return np.int64(n_paths), np.int64(p.steps), states, np.int64(first)

    total, total_sq = sum_blocks(kernel, n_blocks, chunk_args, device, ctx)
    variance = max((total_sq - total * total / n_paths) / (n_paths - 1), 0.0)
    estimate = estimators.interval(total / n_paths, math.sqrt(variance / n_paths), n_paths, p.confidence)
    summary = {**estimate.as_dict(), "paths": n_paths, "steps": p.steps, "path_steps": n_paths * p.steps,
               "path_average_std": math.sqrt(variance), "expected_path_average_std": 1.0 / math.sqrt(p.steps)}
    return KernelResult(summary=summary, paths=n_paths)
