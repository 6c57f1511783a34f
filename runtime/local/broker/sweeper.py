"""The one background thread that applies time-driven transitions: expired leases, ended backoffs,
messages past retention, subscriptions unused past their ttl. It sleeps on a condition until the earliest due
time, and is poked when something earlier becomes due, so an idle emulator uses no CPU."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from runtime.local.broker.background import ConditionThread
from runtime.local.broker.clock import Clock
from runtime.local.broker.delivery import DeadLetter, SubscriptionQueue


class Sweeper:
    """Runs ``SubscriptionQueue.sweep`` on every queue that has something due."""

    def __init__(
        self,
        lock: threading.Lock,
        clock: Clock,
        queues: Callable[[], Iterable[SubscriptionQueue]],
        forward: Callable[[list[DeadLetter]], None],
        expire: Callable[[float], float | None],
    ) -> None:
        """``queues``, ``forward`` (publish dead letters) and ``expire`` (delete the subscriptions unused past
        their ttl at the given time; returns when the next may be due) are called with ``lock`` held."""
        self._cond = threading.Condition(lock)
        self._clock = clock
        self._queues = queues
        self._forward = forward
        self._expire = expire
        self._wake_at: float | None = None
        self._thread = ConditionThread(self._cond, "pubsub-emulator-sweeper", self._run)

    def start(self) -> None:
        """Start the thread (idempotent)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it (idempotent)."""
        self._thread.stop()

    def poke(self, due: float | None) -> None:
        """Tell the sweeper something is due at ``due``; call with the lock held. Cheap when not earlier."""
        if due is not None and (self._wake_at is None or due < self._wake_at):
            self._wake_at = due
            self._cond.notify_all()

    def _run(self) -> None:
        with self._cond:
            while not self._thread.stopping:
                now = self._clock.monotonic()
                expiring = self._expire(now)
                for queue in list(self._queues()):
                    due = queue.next_due()
                    if due is not None and due <= now:
                        self._forward(queue.sweep(now))
                # A second pass: forwarding dead letters may have given an earlier queue new work.
                upcoming = [queue.next_due() for queue in self._queues()] + [expiring]
                self._wake_at = min((due for due in upcoming if due is not None), default=None)
                timeout = None if self._wake_at is None else max(self._wake_at - self._clock.monotonic(), 0.0)
                self._cond.wait(timeout)
