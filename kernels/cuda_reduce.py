"""The one CUDA kernel every block-sum kernel is: each thread sums its items, the block adds up the threads.

A kernel module states only its per-thread function, ``thread_sums(first, count, stride, *args)``: the float64
sums over its items ``first + i * stride``, i < count (a group of random draws, a path), stopping at the
job's last item. Its CPU twin runs the same function with stride 1 over a whole block. ``block_sums_kernel``
makes the kernel ``kernels.launch.sum_blocks`` launches ``[count, THREADS]``: block ``b`` of a launch at
``first_block`` covers items ``(first_block + b) * items_per_block ..``, thread ``t`` takes every
``THREADS``-th of them from ``t``, and the threads' sums are tree-reduced in shared memory
(``kernels.gpu.block_reduce_store_at``) into ``out[b, :]``. The kernel takes the per-kernel arguments as
one tuple, ``kernel(out, first_block, args)``, so one kernel signature serves every argument list.

Variants of the same shape:

- ``scratch``: the thread function takes a local array of that size (an int or a shape) and
  ``scratch_dtype`` (float32 unless said) last (a basket path's per-asset state);
- ``rows``: the thread function adds its sums into a float64 local array ``acc[rows, width]`` it takes last,
  instead of returning them (an option book: one row of sums per contract, more than fits in registers);
  ``out[b]`` holds ``out.shape[1] // width`` rows, reduced one at a time so shared memory stays one row;
- ``stores``: no sums at all: the thread function writes one value per item of its own into ``out`` (a
  float64 vector whose entry 0 is the launch's first item) and returns nothing. It takes its scratch, then
  ``out``, then the launch's first item ``first_block * items_per_block`` (portfolio VaR, which needs every
  scenario's loss, not their sums). The launch grid and the items a thread takes are the same as above.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import Any

from numba import cuda, float32  # numba.cuda imports without a GPU; kernels compile at first launch


def block_sums_kernel(thread_sums: Callable[..., Any], *, width: int, items_per_block: int,
                      scratch: int | tuple[int, ...] = 0, scratch_dtype: Any = float32, rows: int = 0,
                      stores: bool = False, fastmath: bool = True) -> Callable[[], Any]:
    """A factory (built once, at its first call) of the block-sum kernel over ``thread_sums``.

    ``width`` sums per item row (ignored with ``stores``); ``items_per_block`` a multiple of
    ``kernels.gpu.THREADS``; ``scratch``, ``scratch_dtype``, ``rows`` and ``stores`` as in the module
    docstring; ``fastmath`` as the kernel's CPU twin has it (results must agree).
    The factory is what ``kernels.launch.BlockKernel.cuda_factory`` takes: it imports ``kernels.gpu`` and
    compiles nothing until a job runs on a GPU (or the simulator).
    """
    scratch_size = math.prod(scratch) if isinstance(scratch, tuple) else scratch
    if width < 1 or items_per_block < 1 or scratch_size < 0 or rows < 0:
        raise ValueError(f"a block-sum kernel needs width >= 1 and items_per_block >= 1, not {width}, "
                         f"{items_per_block} (scratch {scratch}, rows {rows})")
    if scratch_size and rows:
        raise ValueError(f"a block-sum kernel takes scratch ({scratch}) or rows ({rows}), not both")
    if stores and (rows or not scratch_size):
        # the one storing kernel (portfolio VaR) has scratch; a variant nothing uses is not built
        raise ValueError(f"a storing kernel takes scratch and no rows, not scratch {scratch}, rows {rows}")

    @cache
    def build() -> Any:
        from numba import float64

        from kernels.gpu import THREADS, block_reduce_store_at

        if items_per_block % THREADS:
            raise ValueError(f"items_per_block {items_per_block} is not a multiple of {THREADS} threads")
        per_thread = items_per_block // THREADS

        if stores:

            @cuda.jit(fastmath=fastmath)
            def store_kernel(out, first_block, args):  # type: ignore[no-untyped-def]
                local = cuda.local.array(scratch, scratch_dtype)
                thread_sums((first_block + cuda.blockIdx.x) * items_per_block + cuda.threadIdx.x, per_thread, THREADS,
                            *args, local, out, first_block * items_per_block)

            return store_kernel

        if rows:

            @cuda.jit(fastmath=fastmath)
            def row_kernel(out, first_block, args):  # type: ignore[no-untyped-def]
                shared = cuda.shared.array((width, THREADS), float64)
                acc = cuda.local.array((rows, width), float64)
                tid = cuda.threadIdx.x
                used = out.shape[1] // width
                for r in range(used):
                    for k in range(width):
                        acc[r, k] = 0.0
                thread_sums((first_block + cuda.blockIdx.x) * items_per_block + tid, per_thread, THREADS,
                            *args, acc)
                for r in range(used):
                    for k in range(width):
                        shared[k, tid] = acc[r, k]
                    block_reduce_store_at(shared, out, cuda.blockIdx.x, r * width)

            return row_kernel

        if scratch:

            @cuda.jit(fastmath=fastmath)
            def scratch_kernel(out, first_block, args):  # type: ignore[no-untyped-def]
                shared = cuda.shared.array((width, THREADS), float64)
                local = cuda.local.array(scratch, scratch_dtype)
                tid = cuda.threadIdx.x
                sums = thread_sums((first_block + cuda.blockIdx.x) * items_per_block + tid, per_thread, THREADS,
                                   *args, local)
                for k in range(width):
                    shared[k, tid] = sums[k]
                block_reduce_store_at(shared, out, cuda.blockIdx.x, 0)

            return scratch_kernel

        @cuda.jit(fastmath=fastmath)
        def kernel(out, first_block, args):  # type: ignore[no-untyped-def]
            shared = cuda.shared.array((width, THREADS), float64)
            tid = cuda.threadIdx.x
            sums = thread_sums((first_block + cuda.blockIdx.x) * items_per_block + tid, per_thread, THREADS, *args)
            for k in range(width):
                shared[k, tid] = sums[k]
            block_reduce_store_at(shared, out, cuda.blockIdx.x, 0)

        return kernel

    return build
