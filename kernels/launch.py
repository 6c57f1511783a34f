"""Runs a block-sum kernel on the chosen device: the CPU twin, or the CUDA kernel with pooled buffers.

A kernel module supplies its CPU twin (``cpu(out, first_block, *args)`` filling ``out[count, width]``)
and a factory for its CUDA kernel (``kernels.cuda_reduce.block_sums_kernel``, launched ``[count, THREADS]``
as ``kernel(out, first_block, args)``: the same arguments, as one tuple); this module does the chunking,
device buffers, out-of-memory retry and clean-up for all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels.chunks import run_blocks, run_chunks, warm_up
from kernels.context import RunContext
from kernels.device import CPU


@dataclass(frozen=True)
class BlockKernel:
    """One kernel's two implementations and how many blocks a chunk holds on each device."""

    width: int
    cpu: Callable[..., None]
    cuda_factory: Callable[[], Any]
    cpu_chunk_blocks: int
    gpu_chunk_blocks: int


ChunkArgs = tuple[Any, ...] | Callable[[int, int], tuple[Any, ...]]


def warm_key(kernel: object, device: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """What ``kernels.chunks.warm_up`` keys a warmed kernel by: the kernel, the device and the argument
    types numba specialises on (an array's dtype, dimensions and contiguity; a scalar's type), so a job
    whose arguments would compile a new specialisation warms it up again."""
    def kind(a: Any) -> Any:
        if hasattr(a, "dtype") and hasattr(a, "ndim"):
            contiguous = a.flags.c_contiguous if hasattr(a, "flags") else None
            return a.dtype.str, a.ndim, contiguous
        return type(a)

    return id(kernel), device, tuple(kind(a) for a in args)


def sum_blocks(kernel: BlockKernel, n_blocks: int, args: ChunkArgs, device: str, ctx: RunContext, *,
               first: int = 0) -> np.ndarray:
    """Per-block sums of ``kernel`` over blocks ``first .. first + n_blocks``, summed in block order, on ``device``.

    ``args`` are the arguments after ``(out, first_block)``: a tuple, or a function of the chunk's
    ``(first_block, count)`` for kernels with per-chunk inputs (NumPy arrays are copied to the device).
    A ``first`` above 0 is one shard of a larger job (``kernels.shards``).
    """

    def args_for(start: int, count: int) -> tuple[Any, ...]:
        return args(start, count) if callable(args) else args

    if device == CPU:

        def compute_cpu(start: int, count: int) -> np.ndarray:
            out = np.empty((count, kernel.width), dtype=np.float64)
            kernel.cpu(out, first + start, *args_for(first + start, count))
            return out

        warm_up(compute_cpu, ctx, warm_key(kernel.cpu, device, args_for(first, 1)))
        return run_blocks(n_blocks, kernel.width, kernel.cpu_chunk_blocks, compute_cpu, ctx)

    from kernels import gpu

    launch = kernel.cuda_factory()

    def compute_gpu(start: int, count: int) -> np.ndarray:
        out = gpu.empty((count, kernel.width))
        launch[count, gpu.THREADS](out, first + start, gpu.to_device_all(args_for(first + start, count)))
        return gpu.to_host(out)

    chunk = gpu.budget_blocks(kernel.width * np.dtype(np.float64).itemsize, kernel.gpu_chunk_blocks)
    try:
        warm_up(compute_gpu, ctx, warm_key(launch, device, args_for(first, 1)))
        return run_blocks(n_blocks, kernel.width, chunk, compute_gpu, ctx, on_oom=gpu.release)
    finally:
        gpu.release()


def fill_paths(out: np.ndarray, paths_per_block: int, cpu: Callable[..., None], cuda_factory: Callable[[], Any],
               args: tuple[Any, ...], device: str, ctx: RunContext, *, cpu_chunk_blocks: int,
               gpu_chunk_blocks: int) -> np.ndarray:
    """Fill ``out[i, ...]`` (float32, one row per path) by chunks of path blocks on ``device``; returns ``out``.

    For kernels that keep a value per path instead of per-block sums: ``cpu(rows, first_path, *args)`` fills
    a slice of ``out``; the CUDA kernel is launched one thread per path with the same arguments. On a GPU a
    chunk is also bounded by device memory (one row per path) and halves on out-of-memory.
    """
    n_paths = out.shape[0]

    def rows(start: int, count: int) -> tuple[int, int]:
        first = start * paths_per_block
        return first, min(count * paths_per_block, n_paths - first)

    n_blocks = -(-n_paths // paths_per_block)
    if device == CPU:

        def compute_cpu(start: int, count: int) -> None:
            first, size = rows(start, count)
            cpu(out[first:first + size], np.int64(first), *args)

        warm_up(compute_cpu, ctx, warm_key(cpu, device, args))
        run_chunks(n_blocks, cpu_chunk_blocks, compute_cpu, ctx)
        return out

    from kernels import gpu

    launch = cuda_factory()
    device_args = gpu.to_device_all(args)

    def compute_gpu(start: int, count: int) -> None:
        first, size = rows(start, count)
        chunk = gpu.empty((size, *out.shape[1:]), out.dtype)
        launch[-(-size // gpu.THREADS), gpu.THREADS](chunk, np.int64(first), *device_args)
        out[first:first + size] = gpu.to_host(chunk)

    budget = gpu.budget_blocks(paths_per_block * out[:1].nbytes, gpu_chunk_blocks)
    try:
        warm_up(compute_gpu, ctx, warm_key(launch, device, args))
        run_chunks(n_blocks, budget, compute_gpu, ctx, on_oom=gpu.release)
    finally:
        gpu.release()
    return out
