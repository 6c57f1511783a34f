"""The streaming pull's callback scheduler: one thread per GPU slot, and nothing dropped when a stream closes.

google-cloud-pubsub's own ``ThreadScheduler`` drops the callbacks still waiting for a thread when its
stream closes, and the client then nacks those messages. A message can wait here even though flow
control equals the slots: the client sends an ack to the server *before* it frees the acked message's
place, so the server may already have sent the next message while the acking callback's thread is not
free yet, and Google's servers may send a little more than ``max_outstanding_messages``. A drain that
lands in that moment must not nack a message this replica already holds (a nack burns a delivery
attempt), so ``shutdown(await_msg_callbacks=True)`` runs the waiting callbacks too and hands back nothing.

Among waiting messages the request with the highest ``priority`` runs first (ties: arrival order).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from google.cloud.pubsub_v1.subscriber.scheduler import Scheduler

log = logging.getLogger(__name__)


class SlotScheduler(Scheduler):
    """Runs scheduled callbacks on ``slots`` threads, highest ``priority(message)`` first; never drops on await."""

    def __init__(self, slots: int, priority: Callable[[Any], int], thread_name: str = "gpurt-job") -> None:
        if slots < 1:
            raise ValueError("a scheduler needs at least one slot")
        self._priority = priority
        self._queue: queue.Queue[Any] = queue.Queue()  # the client's dispatcher reads requests from it
        self._cond = threading.Condition()
        self._waiting: list[tuple[int, int, Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = []
        self._order = itertools.count()
        self._closing = False
        self._threads = [threading.Thread(target=self._work, name=f"{thread_name}-{i}", daemon=True)
                         for i in range(slots)]
        for thread in self._threads:
            thread.start()

    @property
    def queue(self) -> queue.Queue[Any]:
        """The queue the subscriber client uses to talk back to its dispatcher."""
        return self._queue

    def schedule(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Queue ``callback(*args, **kwargs)``; ``args[0]`` is the message, whose priority orders the queue."""
        rank = -self._priority(args[0]) if args else 0
        with self._cond:
            if self._closing:
                # The client never schedules after shutdown; if it did, the message's lease lapses.
                log.warning("a callback was scheduled after shutdown; Pub/Sub will redeliver its message")
                return
            heapq.heappush(self._waiting, (rank, next(self._order), callback, args, kwargs))
            self._cond.notify()

    def shutdown(self, await_msg_callbacks: bool = False) -> list[Any]:
        """Stop. Awaiting runs every callback already scheduled and returns ``[]``: there is nothing to nack.

        Without awaiting, the messages still waiting are returned (the client nacks them) and running
        callbacks are left to finish on their own.
        """
        with self._cond:
            self._closing = True
            dropped = [] if await_msg_callbacks else [args[0] for *_, args, _ in self._waiting if args]
            if not await_msg_callbacks:
                self._waiting.clear()
            self._cond.notify_all()
        if await_msg_callbacks:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join()
        return dropped

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._waiting or self._closing)
                if not self._waiting:
                    return
                _, _, callback, args, kwargs = heapq.heappop(self._waiting)
            try:
                callback(*args, **kwargs)
            except Exception:  # the client wraps callbacks already; this only keeps the slot's thread alive
                log.exception("a message callback raised")
