"""Snapshots: a subscription's unacknowledged messages at one moment, plus what its topic receives
afterwards, for Seek to bring back (the service's semantics; it keeps them for up to 7 days)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Final

from runtime.local.broker import proto

# A snapshot lives 7 days minus the age of the oldest message it holds (the service's rule).
SNAPSHOT_LIFETIME_S: Final = 7 * 24 * 3600
UPDATABLE_SNAPSHOT_FIELDS: Final = frozenset({"labels", "expire_time"})


@dataclass(frozen=True)
class Retained:
    """One message a snapshot holds, with the publish times delivery needs."""

    message: proto.PubsubMessage
    published_wall: float
    published_mono: float


@dataclass(eq=False)
class Snapshot:
    """One snapshot: its resource and its messages, in publish order."""

    config: proto.Snapshot
    messages: OrderedDict[str, Retained] = field(default_factory=OrderedDict)

    @classmethod
    def take(cls, name: str, topic: str, labels: dict[str, str], unacked: list[Retained], now_wall: float) -> Snapshot:
        """A snapshot of ``unacked`` messages on ``topic``; later publishes are added with :meth:`add`."""
        oldest = min((r.published_wall for r in unacked), default=now_wall)
        config = proto.Snapshot(name=name, topic=topic, labels=labels)
        config.expire_time.FromNanoseconds(int((oldest + SNAPSHOT_LIFETIME_S) * 1e9))
        return cls(config, OrderedDict((r.message.message_id, r) for r in unacked))

    def add(self, retained: Retained) -> None:
        """A message published to the snapshot's topic after it was taken."""
        self.messages[retained.message.message_id] = retained
