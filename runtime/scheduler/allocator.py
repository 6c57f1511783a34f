"""Large blocks of the gpu-scheduler's heap go back to the OS when they are freed.

glibc's ``malloc`` serves a block of at least its mmap threshold (128 KiB at start) from a memory mapping
of its own, unmapped when the block is freed. But each time such a block is freed, glibc raises the
threshold to that block's size (up to 32 MiB), so the next block of that size comes from the heap instead,
where freeing it rarely gives memory back: smaller allocations made meanwhile sit above and beside it.

The gpu-scheduler (the local Dask scheduler was then in it; it is a process of its own now, which gets the
same threshold from glibc's variable) has one such block that is reallocated for as long
as it runs: CPython's table of interned strings. msgpack interns the keys of every map it decodes, and
several of Dask's messages about a task are keyed by the task's key, so each job interns 8 to 12 strings
that are freed again as the job ends. About 54,000 strings stay interned in this process whatever the jobs
(read with gdb after 1,500 and after 20,000 jobs), but every freed one leaves a used slot behind, so every
10,000 to 15,000 jobs the table (2^18 slots, 3.7 MB) has no free slot left and CPython builds it anew. A
soak of 51,000 jobs measured that as steps of resident memory (+1.5, +1.5 and +3.7 MB) that did not fall
back: a fresh 3.7 MB block from the heap each time. With the threshold pinned, glibc no longer raises it,
every table has a mapping of its own and the old one's is unmapped as it is freed.
"""

from __future__ import annotations

import ctypes
import logging

from runtime.protocol.contract import MALLOC_MMAP_THRESHOLD_BYTES

# mallopt's parameter number for the mmap threshold (glibc's malloc.h).
M_MMAP_THRESHOLD = -3

log = logging.getLogger(__name__)


def pin_mmap_threshold(threshold_bytes: int = MALLOC_MMAP_THRESHOLD_BYTES) -> bool:
    """Fix glibc's mmap threshold at ``threshold_bytes`` for this process; False where libc is not glibc.

    Setting it turns glibc's raising of the threshold off for good (``mallopt(3)``). Blocks under a
    mebibyte (the messages of ordinary jobs) stay in the heap, as before.
    """
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols, libc's among them
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it; musl and macOS have no such threshold
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if mallopt(M_MMAP_THRESHOLD, threshold_bytes) != 1:
        log.warning("glibc refused mmap threshold %d: large freed blocks may stay in resident memory",
                    threshold_bytes)
        return False
    return True
