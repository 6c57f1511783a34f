"""Message ordering: on a subscription with ``enable_message_ordering``, messages that share an ordering
key are delivered one at a time, in publish order. The next one of a key becomes deliverable only once
the one before it is acknowledged, dead-lettered or gone; a nacked or expired one is redelivered first
(pause on nack), so a key never skips ahead. (The service may hand over several of a key at once, in
order; one at a time is the strict form of the same guarantee.) Messages without a key are unordered.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class KeyOrder(Generic[T]):
    """Which message of each ordering key may be delivered; the others wait, parked, in publish order."""

    def __init__(self, key_of: Callable[[T], str], gone: Callable[[T], bool]) -> None:
        self._key_of = key_of
        self._gone = gone
        self._heads: dict[str, T] = {}
        self._parked: dict[str, deque[T]] = {}

    def admit(self, entry: T) -> bool:
        """True if ``entry`` may be delivered now; False if it waits behind an earlier one of its key."""
        key = self._key_of(entry)
        if not key:
            return True
        if key not in self._heads:
            self._heads[key] = entry
            return True
        self._parked.setdefault(key, deque()).append(entry)
        return False

    def finish(self, entry: T) -> T | None:
        """``entry`` is done (acked, dead-lettered, dropped); returns the next one of its key to deliver."""
        key = self._key_of(entry)
        if not key or self._heads.get(key) is not entry:
            return None
        del self._heads[key]
        waiting = self._parked.get(key)
        while waiting:
            following = waiting.popleft()
            if not self._gone(following):
                self._heads[key] = following
                return following
        self._parked.pop(key, None)
        return None

    def reset(self) -> None:
        """Forget every key (before a seek re-admits the subscription's messages in publish order)."""
        self._heads.clear()
        self._parked.clear()
