"""What a kernel receives from the entry point (cooperative controls) and what it hands back."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernels.errors import JobCancelled


class Stopwatch:
    """How much of a job's wall time went to loading rather than to its kernels' work.

    A job's wall time is load (imports, device set-up, each kernel's numba cache load or JIT compile)
    plus kernel time; rates are taken over the kernel time only, so a warm rate is not hidden by a cold
    start. Load runs up to the first kernel's warm-up, plus every later kernel's warm-up (a job with
    several passes loads several kernels).
    """

    def __init__(self) -> None:
        self.warm_at: float | None = None
        self.later_loads_s = 0.0

    def warmed(self, began: float) -> None:
        """Record a kernel warm-up that began at ``began`` (``perf_counter``) and has just finished."""
        now = time.perf_counter()
        if self.warm_at is None:
            self.warm_at = now
        else:
            self.later_loads_s += now - began

    def load_s(self, started: float) -> float:
        """Seconds of loading in a job that started at ``started``; all of it if no kernel ran."""
        first = self.warm_at if self.warm_at is not None else time.perf_counter()
        return first - started + self.later_loads_s


@dataclass(frozen=True)
class RunContext:
    """Cooperative controls handed to a kernel: cancellation polled between chunks, progress 0..1, and
    ``chunk_scale``, the share of each kernel's usual chunk to launch at once (below 1 when a shard is run
    again after a transient failure or a timeout: shorter launches, less device memory; the result does
    not depend on it)."""

    should_stop: Callable[[], bool]
    progress: Callable[[float], None]
    clock: Stopwatch = field(default_factory=Stopwatch)
    chunk_scale: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 < self.chunk_scale <= 1.0:
            raise ValueError(f"chunk_scale must be in (0, 1], not {self.chunk_scale}")

    def part(self, start: float, end: float) -> RunContext:
        """The same controls for one pass of a multi-pass job, its progress 0..1 mapped onto ``start..end``
        of the job's, so the job's progress never goes back."""
        outer = self.progress

        def progress(fraction: float) -> None:
            outer(start + (end - start) * fraction)

        return RunContext(should_stop=self.should_stop, progress=progress, clock=self.clock,
                          chunk_scale=self.chunk_scale)

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
