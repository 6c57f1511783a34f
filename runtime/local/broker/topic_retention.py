"""Topic message retention: a topic with ``message_retention_duration`` keeps every message published to it
for that long, whether or not a subscription took it, so that a subscription (one created later too) can
seek back to a time inside the window and get them again, as on the service
(https://cloud.google.com/pubsub/docs/replay-overview)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from runtime.local.broker import proto
from runtime.local.broker.clock import Clock
from runtime.local.broker.snapshots import Retained


@dataclass(eq=False)
class TopicLog:
    """The messages one topic retains, oldest first."""

    retention_s: float  # protocol seconds; scaled like subscription retention (runtime.local.broker.clock)
    messages: deque[Retained] = field(default_factory=deque)

    def add(self, retained: Retained) -> None:
        """A message published to the topic."""
        self.messages.append(retained)

    def expire(self, clock: Clock) -> list[proto.PubsubMessage]:
        """Drop the messages older than the retention period; returns them (the journal forgets them too)."""
        horizon = clock.monotonic() - clock.span(self.retention_s)
        dropped = []
        while self.messages and self.messages[0].published_mono <= horizon:
            dropped.append(self.messages.popleft().message)
        return dropped

    def since(self, wall_time: float) -> Iterator[Retained]:
        """The retained messages published at or after ``wall_time``, oldest first."""
        return (retained for retained in self.messages if retained.published_wall >= wall_time)
