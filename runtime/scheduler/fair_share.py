"""Which queue's waiting job a free slot starts next: urgent first, then weighted fair share within caps.

Each request queue (``runtime.protocol.queues``) has a stream of its own (``runtime.scheduler.intake``), and every
stream's slot threads share this replica's workers through one ``FairShare``. A slot thread holding a message asks
``acquire(queue)`` before it starts the job and the job gives its place back with ``release(queue)`` when it ends
on its worker. The arbiter grants places one at a time, and whenever one is free it goes to:

1. the urgent queue, if one of its jobs waits (it has no weight and no cap: the probe and on-call operators);
2. otherwise, among the queues with a job waiting and below their cap, the one with the lowest *pass* - stride
   scheduling (Waldspurger and Weihl, 1995): each grant advances the queue's pass by ``STRIDE / weight``, so over
   many grants each backlogged queue gets starts in proportion to its weight, whatever rate it publishes at.

A queue that had nothing waiting rejoins at the pass of the last grant, not at its old one: an idle queue banks no
credit with which it could later take every slot in a burst (at most one stride's worth, as a new queue has).

Places count tasks on the workers: a running job or pack, and one submitted ahead per slot
(``runtime.scheduler.window``, "Submit ahead"), hence ``TASKS_PER_SLOT`` places per slot. A queue's cap bounds its
tasks, so its running jobs never exceed it either. Caps and shares hold per replica (docs/scheduler.md, "Queues").
Nothing running is ever preempted: an urgent job takes the next place that frees.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from runtime.protocol.queues import QueueSpec
from runtime.scheduler.window import PREFETCH_PER_SLOT

# Places on the workers per slot: the running task and the one submitted ahead.
TASKS_PER_SLOT: Final = 1 + PREFETCH_PER_SLOT
# A queue's pass advances by STRIDE / weight per grant; any constant works, this one keeps passes readable.
STRIDE: Final = 1.0
# How often a thread waiting for a place checks whether it should give up (seconds); only a shutdown past its
# deadline makes it give up, and ``wake`` ends the wait at once then, so this is a backstop.
GIVE_UP_POLL_S: Final = 1.0


@dataclass(frozen=True)
class QueueShare:
    """One queue as the arbiter sees it now: jobs waiting for a place, places held, grants since the start."""

    name: str
    weight: int
    max_slots: int | None
    waiting: int
    held: int
    granted: int


class FairShare:
    """Grants the replica's places to queues: urgent first, then by weight (stride scheduling), within caps."""

    def __init__(self, queues: Sequence[QueueSpec], slots: int,
                 on_held: Callable[[str, int], None] | None = None) -> None:
        """``on_held(queue, places)`` is told each change of a queue's places (under the arbiter's lock: keep it
        quick, such as setting a gauge, and never call back into the arbiter)."""
        if slots < 1:
            raise ValueError("a replica needs at least one slot")
        self._queues = {queue.name: queue for queue in queues}
        self._order = list(self._queues)  # ties go to the queue declared first
        self._on_held = on_held
        self._capacity = slots * TASKS_PER_SLOT
        self._cond = threading.Condition()
        self._waiting = dict.fromkeys(self._order, 0)
        self._held = dict.fromkeys(self._order, 0)
        self._granted = dict.fromkeys(self._order, 0)
        self._pass = dict.fromkeys(self._order, 0.0)
        self._virtual = 0.0  # the pass of the latest grant: where a queue that was idle rejoins

    @property
    def capacity(self) -> int:
        """Places on the workers: ``TASKS_PER_SLOT`` per slot."""
        with self._cond:
            return self._capacity

    def resize(self, slots: int) -> None:
        """Follow a new number of slots; jobs holding places beyond the new capacity keep them until they end."""
        if slots < 1:
            raise ValueError("a replica needs at least one slot")
        with self._cond:
            self._capacity = slots * TASKS_PER_SLOT
            self._cond.notify_all()

    def try_acquire(self, queue: str) -> bool:
        """Take a place for ``queue`` if it is the next to get one and one is free now; never waits."""
        with self._cond:
            self._join(queue)
            if self._next() == queue:
                self._grant(queue)
                return True
            self._leave(queue)
            return False

    def acquire(self, queue: str, give_up: Callable[[], bool] = lambda: False) -> bool:
        """Wait for ``queue``'s turn and a free place and take it; False if ``give_up()`` became true first."""
        with self._cond:
            self._join(queue)
            while self._next() != queue:
                if give_up():
                    self._leave(queue)
                    self._cond.notify_all()  # the next queue in line may be another now
                    return False
                self._cond.wait(GIVE_UP_POLL_S)
            self._grant(queue)
            return True

    def release(self, queue: str) -> None:
        """Give back a place ``queue``'s job held: it ended on its worker."""
        with self._cond:
            if self._held[queue] < 1:
                raise RuntimeError(f"queue {queue} released a place it does not hold")
            self._held[queue] -= 1
            self._held_changed(queue)
            self._cond.notify_all()

    def wake(self) -> None:
        """Wake every waiting thread, to look at its ``give_up`` now."""
        with self._cond:
            self._cond.notify_all()

    def waiting(self, queue: str) -> int:
        """Jobs of ``queue`` waiting for a place."""
        with self._cond:
            return self._waiting[queue]

    def shares(self) -> list[QueueShare]:
        """Every queue's state now, in declaration order."""
        with self._cond:
            return [QueueShare(name, self._queues[name].weight, self._queues[name].max_slots, self._waiting[name],
                               self._held[name], self._granted[name]) for name in self._order]

    # --- under _cond ---------------------------------------------------------------------------------

    def _join(self, queue: str) -> None:
        if queue not in self._queues:
            raise KeyError(f"unknown queue {queue!r}")
        if not self._waiting[queue]:
            # Rejoining after having nothing waiting: no credit banked while idle (at most one stride's worth).
            self._pass[queue] = max(self._pass[queue], self._virtual)
        self._waiting[queue] += 1

    def _leave(self, queue: str) -> None:
        self._waiting[queue] -= 1

    def _grant(self, queue: str) -> None:
        self._waiting[queue] -= 1
        self._held[queue] += 1
        self._held_changed(queue)
        self._granted[queue] += 1
        self._virtual = max(self._virtual, self._pass[queue])
        self._pass[queue] += STRIDE / self._queues[queue].weight
        self._cond.notify_all()  # a place may still be free for the next queue in line

    def _held_changed(self, queue: str) -> None:
        if self._on_held is not None:
            self._on_held(queue, self._held[queue])

    def _next(self) -> str | None:
        """The queue the next free place goes to, or None: no place is free, or no queue may take one."""
        if sum(self._held.values()) >= self._capacity:
            return None
        best: str | None = None
        best_pass = math.inf
        for name in self._order:
            spec = self._queues[name]
            if not self._waiting[name] or (spec.max_slots is not None and self._held[name] >= spec.max_slots):
                continue
            if spec.urgent:
                return name
            if self._pass[name] < best_pass:
                best, best_pass = name, self._pass[name]
        return best
