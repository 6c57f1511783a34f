"""What a kernel receives from the entry point (cooperative controls) and what it hands back."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernels.errors import JobCancelled


class Stopwatch:
    """When a job's kernel was warm: the moment its code was imported, compiled or loaded from cache.

    A job's wall time is load (imports, the numba cache load or a JIT compile, device set-up) plus
    kernel time; rates are taken over the kernel time only, so a warm rate is not hidden by a cold start.
    """

    def __init__(self) -> None:
        self.warm_at: float | None = None

    def mark_warm(self) -> None:
        """Record that the kernel is compiled and about to run its work (only the first call counts)."""
        if self.warm_at is None:
            self.warm_at = time.perf_counter()


@dataclass(frozen=True)
class RunContext:
    """Cooperative controls handed to a kernel: cancellation polled between chunks, progress 0..1."""

    should_stop: Callable[[], bool]
    progress: Callable[[float], None]
    clock: Stopwatch = field(default_factory=Stopwatch)

    def checkpoint(self, fraction: float) -> None:
        """Report ``fraction`` done, then raise ``JobCancelled`` if the job was asked to stop."""
        self.progress(min(max(fraction, 0.0), 1.0))
        if self.should_stop():
            raise JobCancelled(f"stopped at {fraction:.0%}")


@dataclass(frozen=True)
class KernelResult:
    """A kernel's JSON-safe summary, its artifacts (name -> bytes), and the paths it simulated."""

    summary: dict[str, Any]
    paths: int
    artifacts: dict[str, bytes] = field(default_factory=dict)
