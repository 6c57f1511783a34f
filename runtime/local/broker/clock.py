"""Time as the emulator sees it, with emulator-only speed-ups for tests and drills.

Pub/Sub's durations are long: ack deadlines of at least 10 s, backoffs up to 10 minutes, retention of at
least 10 minutes. Two factors shorten them in real time while clients keep sending valid values:

- ``time_scale`` multiplies what the server waits out on its own: retry backoffs and retention.
  At 0.01 the contract's 10 s..600 s backoff runs from 0.1 s to 6 s. Streaming clients are unaffected.
- ``lease_time_scale`` multiplies ack deadlines (subscription, stream and ModifyAckDeadline values).
  At 0.05 a 10 s deadline expires after 0.5 s. A streaming ``subscribe()`` client extends leases on its
  own real-time schedule, which a scaled deadline outruns: leave this at 1 where such clients run.

Publish times and seek targets are always real wall-clock timestamps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Clock:
    """Monotonic time for deadlines, wall time for publish timestamps, and the two protocol time scales."""

    time_scale: float = 1.0
    lease_time_scale: float = 1.0

    def __post_init__(self) -> None:
        for name in ("time_scale", "lease_time_scale"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    def monotonic(self) -> float:
        """Seconds on the monotonic clock: deadlines, backoffs and retention are measured on it."""
        return time.monotonic()

    def wall(self) -> float:
        """Seconds since the epoch: publish times and seek targets."""
        return time.time()

    def monotonic_at(self, wall_time: float) -> float:
        """The monotonic time of wall-clock ``wall_time`` (a publish time read back after a restart), so
        retention counts a message's real age; never later than now."""
        return self.monotonic() - max(self.wall() - wall_time, 0.0)

    def span(self, protocol_seconds: float) -> float:
        """Real seconds that a backoff or retention period of ``protocol_seconds`` lasts."""
        return protocol_seconds * self.time_scale

    def lease_span(self, protocol_seconds: float) -> float:
        """Real seconds that an ack deadline of ``protocol_seconds`` lasts."""
        return protocol_seconds * self.lease_time_scale
