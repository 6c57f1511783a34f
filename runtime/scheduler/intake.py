"""Every request queue's streaming pull, sharing this replica's slots: one ``Consumer`` per queue, one ``FairShare``.

Each queue's subscription has a stream of its own, with its own flow control, so the backlog of one queue stays in
Pub/Sub and fills only its own stream's few places, never another queue's: a queue's stream holds at most its
slots x the window's places per slot (``runtime.scheduler.consumer``), where its slots are the replica's, or its cap
if that is lower. Its slot threads take a place from the shared ``FairShare`` before each job starts
(``runtime.scheduler.fair_share``), so the replica runs no more jobs than with one queue, and the next free place
goes to the urgent queue first, then to the queue whose turn it is by weight. ``Intake`` offers what ``Consumer``
does (start, drain, resume, resize, stop), over all of them; the deploy probe's stream is not one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from runtime.protocol.queues import QueueSpec
from runtime.pubsub.admin import subscription_path
from runtime.scheduler.consumer import Consumer
from runtime.scheduler.fair_share import FairShare
from runtime.scheduler.records import Conclusion, Decision, Delivery, Started


def stream_slots(queue: QueueSpec, slots: int) -> int:
    """Slot threads of ``queue``'s stream on a replica of ``slots``: its cap, if lower, since it may hold no more."""
    return slots if queue.max_slots is None else min(slots, queue.max_slots)


class Intake:
    """The streaming pulls of every request queue, sharing the replica's slots; idempotent like ``Consumer``."""

    def __init__(self, subscriber: Any, project: str, queues: Sequence[QueueSpec],
                 process: Callable[[Delivery], Decision | Conclusion | Started], slots: int, *,
                 finish: Callable[[Sequence[Conclusion]], list[Decision]] | None = None,
                 pack: Callable[[Sequence[Delivery]], list[Decision | Conclusion] | Started] | None = None,
                 on_held: Callable[[str, int], None] | None = None) -> None:
        """``queues`` are consumed (``runtime.protocol.queues.with_built_ins`` gives the built-in ones); ``process``,
        ``finish`` and ``pack`` as ``Consumer`` takes them; ``on_held(queue, places)`` hears each change of the
        places a queue's jobs hold (for the metrics)."""
        if not queues:
            raise ValueError("an intake needs at least one queue")
        self._queues = tuple(queues)
        self._slots = slots
        self.fair = FairShare(self._queues, slots, on_held=on_held)
        self._consumers = {
            queue.name: Consumer(subscriber, subscription_path(project, queue.subscription), process,
                                 stream_slots(queue, slots), finish=finish, pack=pack, queue=queue.name, fair=self.fair)
            for queue in self._queues}

    @property
    def queues(self) -> tuple[QueueSpec, ...]:
        """The queues consumed, in declaration order."""
        return self._queues

    def consumer(self, queue: str) -> Consumer:
        """The consumer of ``queue``."""
        return self._consumers[queue]

    @property
    def slots(self) -> int:
        """Jobs this replica runs at once, over every queue."""
        return self._slots

    @property
    def places(self) -> int:
        """Messages the open streams may hold, over every queue."""
        return sum(consumer.places for consumer in self._consumers.values())

    @property
    def waiting(self) -> int:
        """Messages received and not started yet, over every queue."""
        return sum(self.waiting_in(queue.name) for queue in self._queues)

    def waiting_in(self, queue: str) -> int:
        """Messages of ``queue`` received and not started yet: waiting for a slot's thread or for a place."""
        return self._consumers[queue].waiting + self.fair.waiting(queue)

    @property
    def running(self) -> bool:
        """Whether every queue's stream is open and pulling."""
        return all(consumer.running for consumer in self._consumers.values())

    @property
    def draining(self) -> bool:
        """Whether intake is stopped on purpose (maintenance drain)."""
        return all(consumer.draining for consumer in self._consumers.values())

    def start(self) -> None:
        """Open every queue's stream (those open stay as they are)."""
        for consumer in self._consumers.values():
            consumer.start()

    def resume(self) -> None:
        """Resume intake after a drain."""
        self.start()

    def drain(self) -> None:
        """Stop intake on every queue at once; in-flight jobs finish and are acked; nothing is nacked."""
        self._each(lambda consumer: consumer.drain())

    def resize(self, slots: int) -> None:
        """Follow a new number of slots: the shared places, and each stream's (replaced as ``Consumer.resize`` does)."""
        if slots < 1:
            raise ValueError("a replica needs at least one slot")
        self._slots = slots
        self.fair.resize(slots)
        for queue in self._queues:
            self._consumers[queue.name].resize(stream_slots(queue, slots))

    def wait_drained(self, timeout_s: float | None = None) -> bool:
        """Block until every closing stream of every queue has finished its in-flight jobs."""
        return all(consumer.wait_drained(timeout_s) for consumer in self._consumers.values())

    def stop(self, timeout_s: float | None = None) -> bool:
        """Drain every queue and wait, at once (``Consumer.stop`` each); False if any ran out of ``timeout_s``."""
        return all(self._each(lambda consumer: consumer.stop(timeout_s)))

    def shares(self) -> list[dict[str, Any]]:
        """Each queue's weight, cap, messages its stream may hold (``places``) and holds waiting, and the places on
        the workers its jobs hold now (``slots``), for ``GET /status``."""
        return [{"name": share.name, "weight": share.weight, "max_slots": share.max_slots,
                 "places": self._consumers[share.name].places, "waiting": self.waiting_in(share.name),
                 "slots": share.held}
                for share in self.fair.shares()]

    def _each(self, action: Callable[[Consumer], bool | None]) -> list[bool | None]:
        """``action`` on every consumer, on a thread each: a drain waits for its stream to close, and the queues'
        streams close side by side rather than one after another."""
        with ThreadPoolExecutor(len(self._consumers), thread_name_prefix="gpurt-intake") as pool:
            return list(pool.map(action, self._consumers.values()))
