"""The streaming pull's callback scheduler: one thread per GPU slot, and a drain that leaves nothing behind.

A drain must not give back a message this replica already received: a nack burns a delivery attempt,
and a message left unread in the stream waits out its lease before the next delivery, burning one too.
Closing the client's stream at once can do both. The client acks *before* it frees the acked message's
place, and it stops reading the stream while 80 % of its places are taken: the server, which frees the
place on the ack, sends the next message, which then sits unread in the stream (or held back in the
client, which nacks it at close) until the client frees places again.

So a draining stream first *holds its acks*: a job that finishes frees its place in the client (the
message leaves lease management: its result is already stored and published, so a redelivery would be
answered from the store) and parks its ack, so the server frees no place and sends nothing new for
it. The slot's thread goes on at once with the next message already received (a prefetched one, see
``runtime.scheduler.consumer``): a message held is a job that starts as soon as its slot frees, drain
or not. The stream closes as soon as nothing can be left unread - for ``QUIET_GRACE_S`` in a row the
client's dispatcher has handled every request (acks sent before the drain are answered), and either the
client is reading (fewer than 80 % of places busy: it reads what was sent within the grace) or every
place is taken by a message it knows (so the server has sent nothing else). Closing releases the
parked acks, which the client still sends before it stops, and the client waits for running jobs.
Callbacks still waiting when the stream closes run too; nothing is handed back to nack.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from google.cloud.pubsub_v1.subscriber.scheduler import Scheduler

from runtime.scheduler.records import Decision, Settle

# A draining stream closes after being quiet this long (seconds): time for the client to read a message
# it was sent before the drain, confirm its receipt (one ModifyAckDeadline RPC) and hand it over.
QUIET_GRACE_S: Final = 0.5
# google-cloud-pubsub reads the stream again only once fewer than this share of its places is busy
# (its _RESUME_THRESHOLD).
CLIENT_RESUME_SHARE: Final = 0.8
# A quiet stream whose dispatcher never reports catching up closes after this long anyway (seconds); an
# ack is answered in milliseconds, so this only matters if a client version reads its queue differently.
CATCH_UP_LIMIT_S: Final = 10.0
# How often a draining stream checks whether it is quiet (seconds).
QUIET_POLL_S: Final = 0.05

log = logging.getLogger(__name__)


class RequestQueue(queue.Queue[Any]):
    """The queue the client's dispatcher reads ack, nack and lease requests from; knows when it caught up.

    The dispatcher takes a batch, handles it (the ack RPC, then freeing the messages' places, which lets
    the client read or release more messages) and only then blocks on ``get()`` for the next batch. A
    blocking ``get()`` on an empty queue therefore means every request put so far has been handled.
    """

    def __init__(self) -> None:
        super().__init__()
        self._caught_up = True  # nothing put yet

    @property
    def caught_up(self) -> bool:
        """Whether the dispatcher has handled everything put so far."""
        with self.mutex:
            return self._caught_up

    def _put(self, item: Any) -> None:  # called with ``mutex`` held
        self._caught_up = False
        super()._put(item)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        """``Queue.get``; a blocking call without timeout on an empty queue marks the dispatcher caught up.

        A call with a timeout does not wait: it is the dispatcher collecting a batch after its first request.
        """
        if block and timeout is None:
            with self.mutex:
                if not self._qsize():
                    self._caught_up = True
        elif block:
            # The client waits up to 10 ms (its _MAX_BATCH_LATENCY) for more requests to send with the first.
            # Here acks come one at a time, each after a job's result is out, and the server sends that
            # slot's next message only once the ack reaches it: the wait would idle every slot 10 ms per
            # job. Requests queued while the dispatcher was busy still go out together.
            return super().get(block=False)
        return super().get(block, timeout)


@dataclass
class _Carried:
    """A job a slot's thread submitted and left running while it went on (``SlotScheduler.carry``)."""

    complete: Callable[[], None]
    ready: Callable[[], bool]
    deadline: float = math.inf  # by then it is ready (its timeout), once the slot turned to it


class _Slot(threading.local):
    """What one slot's thread carries: at most one job submitted ahead."""

    carried: _Carried | None = None


class SlotScheduler(Scheduler):
    """Runs a stream's callbacks on ``slots`` threads, in arrival order.

    ``places`` is the stream's flow control (``max_messages``): the messages the client may hold at once,
    running, waiting for a thread or concluding; it defaults to ``slots``. Callbacks settle their message
    through ``settle``, or hand what is left of it to ``conclude``, which finishes it on one of ``slots``
    concluding threads and settles it there, while the slot's thread takes its next message; after
    ``hold`` settlements park until the stream closes (``shutdown``), which waits for conclusions too.

    A callback whose job is on its way to a worker may ``carry`` it: the slot's thread then takes its next
    message before waiting for that job, so the job after it is already queued on a worker when it ends
    (docs/scheduler.md, "Submit ahead"). A slot carries one job at most, and completes it as soon as it is
    done with no message waiting, when its next message has been started, or when the stream closes.
    """

    def __init__(self, slots: int, thread_name: str = "gpurt-job", places: int | None = None) -> None:
        if slots < 1:
            raise ValueError("a scheduler needs at least one slot")
        if places is not None and places < slots:
            raise ValueError("a stream needs at least one place per slot")
        self._slots = slots
        self._places = places or slots
        self._requests = RequestQueue()
        self._cond = threading.Condition()
        self._waiting: deque[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = deque()
        self._handed = 0  # messages scheduled
        self._parked: list[tuple[Any, bool]] = []  # settlements waiting for the close: (message, ack)
        self._settled = 0  # messages acked or nacked
        self._holding = False
        self._closing = False
        self._concluding: deque[tuple[list[Any], Callable[[], list[Decision]]]] = deque()  # (messages, finish)
        self._slot_threads = slots  # slot threads still running: while any is, a conclusion may come
        self._slot = _Slot()
        self._idle = 0  # slot threads waiting for a message with no job of their own
        self._threads = [threading.Thread(target=self._work, name=f"{thread_name}-{i}", daemon=True)
                         for i in range(slots)]
        # As many as slots: each slot concludes at most one job per job it runs, so none waits for another's.
        self._concluders = [threading.Thread(target=self._conclude_work, name=f"{thread_name}-conclude-{i}",
                                             daemon=True) for i in range(slots)]
        for thread in (*self._threads, *self._concluders):
            thread.start()

    @property
    def waiting(self) -> int:
        """Messages received and waiting for a slot's thread to take them."""
        with self._cond:
            return len(self._waiting)

    @property
    def queue(self) -> RequestQueue:
        """The queue the subscriber client uses to talk back to its dispatcher."""
        return self._requests

    def schedule(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Queue ``callback(*args, **kwargs)``; ``args[0]`` is the message."""
        with self._cond:
            self._handed += 1
            self._waiting.append((callback, args, kwargs))
            self._cond.notify_all()

    def conclude(self, messages: Sequence[Any], finish: Callable[[], list[Decision]]) -> None:
        """Run ``finish`` (store and publish jobs' results) on a concluding thread, then settle each of
        ``messages`` by its decision (one per message, in order). The messages keep their places until then."""
        with self._cond:
            self._concluding.append((list(messages), finish))
            self._cond.notify_all()

    def carry(self, complete: Callable[[], None], ready: Callable[[], bool],
              on_ready: Callable[[Callable[[], None]], None], start_clock: Callable[[], float]) -> None:
        """Called on a slot's thread: leave a started job to ``complete`` later, once ``ready`` (``on_ready``
        calls back when it ends; ``start_clock`` starts its timeout and says when it is up) or when the
        slot has started its next message. The job the slot carried before is completed now, first: this
        one starts on its worker when that one ends, so its timeout counts from then."""
        slot = self._slot
        carried = _Carried(complete, ready)
        previous, slot.carried = slot.carried, carried
        on_ready(self._wake)
        if previous is not None:
            previous.complete()
        carried.deadline = start_clock()

    def complete_carried(self) -> None:
        """Called on a slot's thread: complete the job it carries now, if any (before a job that must wait)."""
        slot = self._slot
        carried, slot.carried = slot.carried, None
        if carried is not None:
            carried.complete()

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def take_waiting(self, wanted: Callable[[Any], bool], limit: int) -> list[Any]:
        """Take the messages waiting for a slot, from the front, while ``wanted(message)``, at most ``limit``
        and at most this slot's share of those waiting (their number divided by the slots, rounded up), so
        that one slot's pack does not leave the other slots idle (each has the job it submitted ahead).

        They leave the queue: the caller runs them (a pack, ``runtime.scheduler.packing``) and settles each.
        """
        taken: list[Any] = []
        with self._cond:
            limit = min(limit, -(-len(self._waiting) // self._slots))
            while self._waiting and len(taken) < limit:
                _, args, _ = self._waiting[0]
                if not args or not wanted(args[0]):
                    break
                self._waiting.popleft()
                taken.append(args[0])
        return taken

    def settle(self, message: Any, ack: bool) -> None:
        """Ack or nack ``message`` - at once, or, while the stream drains, when it closes."""
        with self._cond:
            if self._holding and not self._closing:
                # Free its place in the client, so the client reads on; its ack waits for the close. The
                # thread does not wait with it: it takes the next message already received.
                message.drop()
                self._parked.append((message, ack))
                self._cond.notify_all()
                return
            self._send(message, ack)

    def _send(self, message: Any, ack: bool) -> None:
        """Ack or nack now; the caller holds ``_cond``, so the quiet check never sees this message settled
        before its request is queued."""
        self._settled += 1
        if ack:
            message.ack()
        else:
            message.nack()

    def hold(self) -> None:
        """Start draining: from now on settlements park until the stream closes."""
        with self._cond:
            self._holding = True

    def wait_quiet(self, stop: threading.Event) -> None:
        """Block until nothing can be left unread by a close, for ``QUIET_GRACE_S`` in a row (or ``stop``)."""
        unread_free_since: float | None = None
        quiet_since: float | None = None
        while not stop.wait(QUIET_POLL_S):
            now = time.monotonic()
            with self._cond:
                if self._closing:  # the stream ended on its own
                    return
                unsettled = self._handed - self._settled  # every message the server counts against us
                active = unsettled - len(self._parked)  # still holding a place in the client
                reading = active < CLIENT_RESUME_SHARE * self._places
                nothing_unread = reading or unsettled >= self._places
            unread_free_since = (now if unread_free_since is None else unread_free_since) if nothing_unread else None
            caught_up = self._requests.caught_up or (
                unread_free_since is not None and now - unread_free_since > CATCH_UP_LIMIT_S)
            if not (nothing_unread and caught_up):
                quiet_since = None
                continue
            quiet_since = now if quiet_since is None else quiet_since
            if now - quiet_since >= QUIET_GRACE_S:
                return

    def shutdown(self, await_msg_callbacks: bool = False) -> list[Any]:
        """Stop; parked settlements go out. Awaiting runs every scheduled callback and returns ``[]``.

        Without awaiting, the messages still waiting are returned (the client nacks them) and running
        callbacks are left to finish on their own.
        """
        with self._cond:
            self._closing = True
            parked, self._parked = self._parked, []
            for message, ack in parked:
                self._send(message, ack)
            dropped = [] if await_msg_callbacks else [args[0] for _, args, _ in self._waiting if args]
            if not await_msg_callbacks:
                self._waiting.clear()
            self._cond.notify_all()
        if await_msg_callbacks:
            # Slot threads first: their last jobs hand conclusions on, which the concluding threads finish
            # before they stop, so every ack goes out before the client stops its dispatcher.
            for thread in (*self._threads, *self._concluders):
                if thread is not threading.current_thread():
                    thread.join()
        return dropped

    def _work(self) -> None:
        slot = self._slot

        def carried_ready() -> bool:
            return slot.carried is not None and slot.carried.ready()

        def may_take() -> bool:
            # A slot whose own job is on the workers leaves the next message to a slot without one: that one's
            # job starts at once, and each slot's carried job then starts when the slot's last one ends.
            return bool(self._waiting) and (slot.carried is None or not self._idle)
        try:
            while True:
                with self._cond:
                    while not (may_take() or self._closing or carried_ready()):
                        # Woken when a message comes, the carried job ends, or its time is up.
                        deadline = math.inf if slot.carried is None else slot.carried.deadline
                        idle = slot.carried is None
                        self._idle += idle
                        try:
                            self._cond.wait(None if deadline == math.inf else max(0.0, deadline - time.monotonic()))
                        finally:
                            self._idle -= idle
                    if may_take():
                        # Even with the carried job done: its result is fetched after the next job is on its way.
                        callback, args, kwargs = self._waiting.popleft()
                    elif slot.carried is None:
                        return  # closing, nothing left
                    else:
                        callback, args, kwargs = self.complete_carried, (), {}
                try:
                    callback(*args, **kwargs)
                except Exception:  # the client wraps callbacks already; this only keeps the slot's thread alive
                    log.exception("a message callback raised")
        finally:
            with self._cond:
                self._slot_threads -= 1
                self._cond.notify_all()  # the concluding threads stop once no slot thread can hand them more

    def _conclude_work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._concluding or (self._closing and not self._slot_threads))
                if not self._concluding:
                    return
                messages, finish = self._concluding.popleft()
            try:
                acks = [decision.settle is Settle.ACK for decision in finish()]
            except Exception:  # finish never raises; if it did, the messages are redelivered
                log.exception("concluding jobs raised; they will be redelivered")
                acks = []
            if len(acks) != len(messages):
                acks = [False] * len(messages)
            with self._cond:  # settled together: the client's dispatcher sends their acks in one request
                for message, ack in zip(messages, acks, strict=True):
                    self.settle(message, ack)
