"""CUDA plumbing shared by the kernels: launch shape, in-block reduction, device buffers, memory pool.

Imported only when a job runs on ``gpu`` or ``cudasim``. Device buffers come from cupy's memory pool when
cupy is installed (the ``gpu`` extra), so chunk after chunk reuses the same blocks; the pool's cached
blocks are handed back to the driver when a job ends. Without cupy (the simulator) numba allocates.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Final

import numpy as np
from numba import cuda

from kernels.device import simulator_enabled

# Threads per CUDA block. Fixed, not tuned per launch: the in-block reduction order depends on it, and
# a result must not depend on the launch configuration.
THREADS: Final = 256
# Fraction of the device's free memory one chunk's buffers may take; the rest is headroom for the
# driver, the context and other work on the same GPU.
MEMORY_BUDGET_FRACTION: Final = 0.5


@cuda.jit(device=True)
def block_reduce_store_at(shared, out, row, offset):  # type: ignore[no-untyped-def]
    """Tree-sum ``shared[k, :THREADS]`` for every k and store the sums in ``out[row, offset + k]``.

    Every thread of the block must call it after writing its own column of ``shared``; on return
    ``shared`` may be written again (kernels with many sums reduce them a slice at a time).
    """
    tid = cuda.threadIdx.x
    cuda.syncthreads()
    stride = THREADS // 2
    while stride > 0:
        if tid < stride:
            for k in range(shared.shape[0]):
                shared[k, tid] += shared[k, tid + stride]
        cuda.syncthreads()
        stride //= 2
    if tid == 0:
        for k in range(shared.shape[0]):
            out[row, offset + k] = shared[k, 0]
    cuda.syncthreads()


@cache
def _cupy() -> Any | None:
    try:
        import cupy
    except ImportError:
        return None
    return cupy


def pooled() -> bool:
    """Whether device arrays are cupy's (a real GPU with the ``gpu`` extra), which NumPy-like code can read
    on the device; in the simulator they are numba's."""
    return not simulator_enabled() and _cupy() is not None


def empty(shape: tuple[int, ...], dtype: type = np.float64) -> Any:
    """A device array from cupy's pool (or numba's allocator without cupy)."""
    if pooled():
        return _cupy().empty(shape, dtype=dtype)
    return cuda.device_array(shape, dtype=dtype)


def to_device_all(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``args`` with every NumPy array copied to the device once (numba would copy back after launch)."""
    return tuple(cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args)


def to_host(array: Any) -> np.ndarray:
    """Copy a device array (cupy or numba) to a NumPy array."""
    if hasattr(array, "get"):
        return array.get()
    return array.copy_to_host()


def release() -> None:
    """Return cached device memory to the driver: after an out-of-memory error and at the end of a job."""
    cupy = None if simulator_enabled() else _cupy()
    if cupy is not None:
        cupy.get_default_memory_pool().free_all_blocks()


def free_bytes() -> float:
    """Free device memory now, in bytes (infinite in the simulator)."""
    free, _total = cuda.current_context().get_memory_info()
    return float(free)


def budget_blocks(bytes_per_block: int, cap: int) -> int:
    """How many blocks of ``bytes_per_block`` device memory one chunk may use, at most ``cap``."""
    fitting = free_bytes() * MEMORY_BUDGET_FRACTION // max(bytes_per_block, 1)
    return int(max(1, min(cap, fitting)))
