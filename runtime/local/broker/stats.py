"""Emulator-only statistics records: what ``EmulatorHandle.stats()`` returns and ``GET /stats`` serves."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SubscriptionStats:
    """Emulator-only view of one subscription (see runtime.local.broker.admin)."""

    name: str
    topic: str
    undelivered: int
    outstanding: int
    dead_lettered: int
    acked_retained: int
    # Publish time (epoch s) of the oldest unacked message; a gauge for monitoring, left out of equality.
    oldest_unacked_wall: float | None = field(default=None, compare=False)
    # Bytes of the messages the subscription keeps alive (SubscriptionQueue.held_bytes), left out of equality.
    held_bytes: int = field(default=0, compare=False)


@dataclass(frozen=True)
class EmulatorStats:
    """Emulator-only counters: per subscription, and published messages per topic."""

    subscriptions: tuple[SubscriptionStats, ...]
    published: dict[str, int] = field(default_factory=dict)

    def subscription(self, subscription_id: str) -> SubscriptionStats:
        """The stats of the subscription with this short id (or full name); KeyError if absent."""
        for stats in self.subscriptions:
            if subscription_id in (stats.name, stats.name.rsplit("/", 1)[-1]):
                return stats
        raise KeyError(subscription_id)
