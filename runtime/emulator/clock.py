"""Time as the emulator sees it, with an emulator-only speed-up for tests.

Pub/Sub's durations are long (ack deadlines of at least 10 s, retention of at least 10 minutes, backoffs
up to 10 minutes). ``time_scale`` multiplies every such protocol duration before it is turned into a
real-time deadline, so a test can run a 10 s ack deadline in 0.5 s (``time_scale=0.05``) while clients
still send valid values. Publish times and seek targets stay real wall-clock timestamps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Clock:
    """Monotonic time for deadlines, wall time for publish timestamps, and the protocol time scale."""

    time_scale: float = 1.0

    def __post_init__(self) -> None:
        if not self.time_scale > 0:
            raise ValueError(f"time_scale must be positive, got {self.time_scale}")

    def monotonic(self) -> float:
        """Seconds on the monotonic clock: deadlines, backoffs and retention are measured on it."""
        return time.monotonic()

    def wall(self) -> float:
        """Seconds since the epoch: publish times and seek targets."""
        return time.time()

    def span(self, protocol_seconds: float) -> float:
        """Real seconds that a protocol duration (ack deadline, backoff, retention) lasts."""
        return protocol_seconds * self.time_scale
