"""Give the memory of large messages back to the system once the broker is done with them.

Two habits of the C allocator (glibc) kept a broker at hundreds of MB after its messages were gone.

First, glibc serves a large allocation with its own mapping and unmaps it when freed, but "large" moves: each time such
a block is freed, the threshold rises to its size (up to 32 MiB). After the first few megabyte messages, every
later one comes from the heap of the thread that parsed it, and a heap keeps what it grew to: the broker
stayed at hundreds of MB after its messages were acknowledged or refused. A fixed threshold keeps every block
of a message's size in a mapping of its own, so freeing it returns it at once.

Second, gRPC reads a request in many small buffers, which come from the heap; freed, they stay with the
process. A refused request of 300 MB left 440 MB behind; ``trim`` after such a refusal hands the free
pages back (200 MB, what the process held before).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from typing import Any, Final

log = logging.getLogger(__name__)

# glibc's mallopt parameter number for the mmap threshold (malloc.h: M_MMAP_THRESHOLD).
_M_MMAP_THRESHOLD: Final = -3
# Blocks from this size up get a mapping of their own (bytes). Well below a typical message of a megabyte and
# more, well above the small objects a request is parsed into, whose mapping per block would cost a system
# call each.
LARGE_BLOCK_BYTES: Final = 256 * 1024


@functools.cache
def _glibc_function(name: str) -> Any:
    """``name`` from the C library, or None where it has none (not glibc: musl, macOS)."""
    library = ctypes.util.find_library("c")
    if library is None:
        return None
    try:
        return getattr(ctypes.CDLL(library), name)
    except (OSError, AttributeError):
        return None


def return_large_blocks(threshold: int = LARGE_BLOCK_BYTES) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes for this process; False where the C library is not
    glibc (nothing changes there)."""
    mallopt = _glibc_function("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    done = bool(mallopt(_M_MMAP_THRESHOLD, threshold))
    if not done:
        log.warning("could not fix the C library's mmap threshold; large messages may stay in the heap")
    return done


def trim() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim``; nothing elsewhere). It walks the
    heaps: call it after freeing much at once, not per message."""
    malloc_trim = _glibc_function("malloc_trim")
    if malloc_trim is not None:
        malloc_trim(0)
