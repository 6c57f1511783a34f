"""Runs a kernel over its path blocks chunk by chunk: cancellation, progress, and out-of-memory retry.

A kernel splits its samples into fixed-size *blocks* (the unit its random streams and partial sums are
keyed by) and computes per-block sums for a range of blocks at a time. Summing those rows strictly in
block order makes the total bit-for-bit independent of the chunk size, and of the device's launch grid.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Final, Protocol

import numpy as np

from kernels.errors import TransientJobError

if TYPE_CHECKING:
    from kernels.context import RunContext

_CUDA_ERROR_OUT_OF_MEMORY: Final = 2  # CUresult values in cuda.h
_CUDA_ERROR_LAUNCH_TIMEOUT: Final = 702


class BlockRunner(Protocol):
    """Computes per-block sums, shape ``(count, width)``, for blocks ``start .. start + count``."""

    def __call__(self, start: int, count: int) -> np.ndarray: ...


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is a CUDA out-of-memory error from numba's driver or from cupy's allocator."""
    name = type(exc).__name__
    if name == "OutOfMemoryError":  # cupy.cuda.memory.OutOfMemoryError
        return True
    code = getattr(exc, "code", None)  # numba's CudaAPIError carries a CUresult (enum member or int)
    return name == "CudaAPIError" and (code == _CUDA_ERROR_OUT_OF_MEMORY or "OUT_OF_MEMORY" in str(code))


def is_launch_timeout(exc: BaseException) -> bool:
    """Whether ``exc`` is CUDA's launch timeout: a kernel ran past the device's watchdog and was killed.

    Unlike out-of-memory it cannot be retried in the same process (the CUDA context is lost), so the job
    fails transiently and its next run (a shard's next attempt) launches smaller chunks.
    """
    code = getattr(exc, "code", None)
    return type(exc).__name__ == "CudaAPIError" and (code == _CUDA_ERROR_LAUNCH_TIMEOUT
                                                     or "LAUNCH_TIMEOUT" in str(code))


def _nothing() -> None:
    return None


def run_chunks(
    n_blocks: int,
    chunk_blocks: int,
    compute: Callable[[int, int], None],
    ctx: RunContext,
    *,
    on_oom: Callable[[], None] = _nothing,
    oom: Callable[[BaseException], bool] = is_out_of_memory,
) -> None:
    """Call ``compute(start, count)`` over all ``n_blocks`` blocks in order, ``chunk_blocks`` at a time.

    ``ctx.chunk_scale`` scales ``chunk_blocks`` down. Checks ``ctx`` for cancellation between chunks. An
    out-of-memory error calls ``on_oom`` (to free cached device memory) and retries the chunk at half the
    size; failing at one block is transient, and so is a launch timeout (``is_launch_timeout``).
    """
    start = 0
    chunk = max(1, min(int(chunk_blocks * ctx.chunk_scale), n_blocks))
    ctx.checkpoint(0.0)
    while start < n_blocks:
        count = min(chunk, n_blocks - start)
        try:
            compute(start, count)
        except Exception as exc:
            if is_launch_timeout(exc):
                raise TransientJobError(f"a chunk of {count} blocks ran past the GPU's watchdog (CUDA launch "
                                        "timeout); a smaller chunk is launched on the next attempt") from exc
            if not oom(exc):
                raise
            on_oom()
            if count == 1:
                raise TransientJobError("CUDA out of memory even for the smallest chunk") from exc
            chunk = max(1, count // 2)
            continue
        start += count
        ctx.checkpoint(start / n_blocks)


# Kernels (with their argument types) already warmed up in this process: see ``warm_up``.
_WARMED: Final[set[Hashable]] = set()


def warm_up(compute: Callable[[int, int], object], ctx: RunContext, key: Hashable | None = None) -> None:
    """Run block 0 once and discard it, and count that time as loading on ``ctx.clock``.

    The first call of a numba function loads it from the cache or compiles it (seconds); doing that on
    one block (microseconds of work) keeps it out of the kernel time a job's rate is taken over. With a
    ``key`` (the kernel and its argument types: ``kernels.launch.warm_key``) a kernel is warmed once per
    process: a later job finds it compiled, and a second launch of block 0 would only add its latency
    (a basket path's walk is latency-bound: one block costs as long as a whole revaluation).
    """
    began = time.perf_counter()
    if key is None or key not in _WARMED:
        compute(0, 1)
        if key is not None:
            _WARMED.add(key)
    ctx.clock.warmed(began)


def run_blocks(
    n_blocks: int,
    width: int,
    chunk_blocks: int,
    compute: BlockRunner,
    ctx: RunContext,
    *,
    on_oom: Callable[[], None] = _nothing,
    oom: Callable[[BaseException], bool] = is_out_of_memory,
) -> np.ndarray:
    """Sum ``compute``'s per-block rows over all ``n_blocks``, chunk by chunk (see ``run_chunks``)."""
    total = np.zeros(width, dtype=np.float64)

    def accumulate(start: int, count: int) -> None:
        nonlocal total
        total = add_in_order([total, compute(start, count)])

    run_chunks(n_blocks, chunk_blocks, accumulate, ctx, on_oom=on_oom, oom=oom)
    return total


def add_in_order(parts: Sequence[np.ndarray]) -> np.ndarray:
    """The sum of every row of ``parts`` (rows of per-block sums), added one row after another.

    cumsum adds row after row, so a total does not depend on where chunks or shards begin and end.
    """
    return np.cumsum(np.vstack(parts), axis=0)[-1]  # type: ignore[no-any-return]
