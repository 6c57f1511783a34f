"""Subscription expiry: a subscription with an ``expiration_policy`` that nobody uses for its ``ttl`` is
deleted, as the service deletes it.

Clients make private subscriptions that expire a day after their process stops using them (the Python
client's and the CLI's result subscriptions); without expiry, each crashed client left one behind on the local
broker, collecting every result from then on. In use means: a Pull waiting or a StreamingPull open on it
(the whole time), or a Pull, Acknowledge, ModifyAckDeadline or Seek naming it. A subscription without an
expiration policy, or with one without a ``ttl``, never expires here (the service's default for a
subscription created without a policy is 31 days of inactivity; a local platform left off for a month keeps
its subscriptions). The ttl runs in protocol time (``Clock.span``, as retention), and a broker that restarts
counts from its start: a restart is no reason to delete anything sooner.
"""

from __future__ import annotations

from collections.abc import Callable

from runtime.local.broker import proto
from runtime.local.broker.clock import Clock

# The service's shortest ttl: "The minimum allowed value for expirationPolicy.ttl is 1 day."
MIN_TTL_S = 24 * 3600


def ttl_s(subscription: proto.Subscription) -> float | None:
    """The subscription's ttl in protocol seconds, or None when it never expires."""
    if not subscription.HasField("expiration_policy") or not subscription.expiration_policy.HasField("ttl"):
        return None
    ttl = subscription.expiration_policy.ttl.ToNanoseconds() / 1e9
    return ttl if ttl > 0 else None


class Expiry:
    """When each expiring subscription was last used; which are due. Called with the broker lock held."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._spans: dict[str, float] = {}  # real seconds of inactivity each may have
        self._last_used: dict[str, float] = {}  # monotonic

    def track(self, subscription: proto.Subscription) -> float | None:
        """Count ``subscription``'s inactivity from now (creation, restore, an update of its policy); returns
        when it is due, or None if it never expires."""
        ttl = ttl_s(subscription)
        if ttl is None:
            self.forget(subscription.name)
            return None
        now = self._clock.monotonic()
        self._spans[subscription.name] = self._clock.span(ttl)
        self._last_used[subscription.name] = now
        return now + self._spans[subscription.name]

    def used(self, name: str) -> None:
        """Someone used the subscription ``name`` now."""
        if name in self._last_used:
            self._last_used[name] = self._clock.monotonic()

    def forget(self, name: str) -> None:
        """The subscription is gone, or no longer expires."""
        self._spans.pop(name, None)
        self._last_used.pop(name, None)

    def due(self, now: float, in_use: Callable[[str], bool]) -> tuple[list[str], float | None]:
        """The subscriptions unused for their ttl by ``now`` (``in_use``: one a Pull or stream holds now), and
        the earliest time another may be due."""
        expired: list[str] = []
        upcoming: list[float] = []
        for name, span in self._spans.items():
            if in_use(name):
                self._last_used[name] = now
            deadline = self._last_used[name] + span
            if deadline <= now:
                expired.append(name)
            else:
                upcoming.append(deadline)
        return expired, min(upcoming, default=None)
