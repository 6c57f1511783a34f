"""Large blocks freed by the gpu-scheduler go back to the OS: glibc's mmap threshold is pinned at start.

Unpinned, glibc raises the threshold to the size of each large block freed, so the next block of that size
comes from the heap, where it stays resident after it is freed (runtime/scheduler/allocator.py). The probe frees
a 4 MiB block and allocates another: whether the second has a mapping of its own is glibc's ``hblks``.
Only the pinned outcome is asserted: unpinned, where the second block lands depends on the state of the
child's heap after its imports (a CI run found it mapped once), so it shows glibc's default, not ours.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

import runtime.scheduler.__main__ as entry
from runtime.scheduler import allocator
from runtime.scheduler.settings import Settings, SettingsError

ROOT = Path(__file__).resolve().parents[3]
glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the mmap threshold is glibc's")

PROBE = """
import ctypes
from runtime.scheduler.allocator import pin_mmap_threshold

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
assert pin_mmap_threshold()
block = bytearray(4 << 20)
del block  # freed: unpinned, glibc would raise its threshold past this size here
mapped = libc.mallinfo2().hblks
block = bytearray(4 << 20)
print(libc.mallinfo2().hblks - mapped)
"""


def _mappings_for_second_block() -> int:
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=True)
    return int(done.stdout.strip())


@glibc_only
def test_a_large_block_allocated_again_after_a_free_gets_its_own_mapping_once_pinned() -> None:
    assert _mappings_for_second_block() == 1


def test_the_scheduler_pins_the_threshold_before_anything_else(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(allocator, "pin_mmap_threshold", lambda: calls.append("pin") or True)

    def no_settings(cls: type[Settings]) -> Settings:
        calls.append("settings")
        raise SettingsError("GPURT_PROJECT: missing")

    monkeypatch.setattr(Settings, "from_env", classmethod(no_settings))
    assert entry.main() == 2
    assert calls == ["pin", "settings"]
