"""What a kernel receives from the entry point (cooperative controls) and what it hands back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernels.errors import JobCancelled


@dataclass(frozen=True)
class RunContext:
    """Cooperative controls handed to a kernel: cancellation polled between chunks, progress 0..1."""

    should_stop: Callable[[], bool]
    progress: Callable[[float], None]

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
