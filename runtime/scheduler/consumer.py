"""Streaming pull on ``gpu-job-request-sub``: receive, hand to the processor, ack or nack.

Flow control admits at most ``slots`` x the window's places per slot (the server is told too, so it
sends no more). In the narrow window (``runtime.scheduler.window``) that is per slot one running, one waiting
for it - submitted ahead, so queued on a worker (``SlotScheduler.carry``) - and one whose job has run and
whose result is being stored and published on a concluding thread (``SlotScheduler.conclude``). A slot
whose job ends therefore has the next one starting on its worker at once: it idles neither for the ack ->
broker -> receipt round trip, nor for the result's store writes and Publish, nor for Dask's submit ->
worker -> result round trip. A place left free by a quick conclusion holds a second waiting message, so
at most ``slots`` x 2 messages wait. Under a backlog of tiny jobs the stream is replaced by one with a
wide window, deep enough for packs. ``max_lease_duration`` covers the jobs ahead of the last held one,
so the client's own leaser keeps the lease of a running job and of one waiting for its slot alike. Jobs
run on the stream's ``SlotScheduler``, one thread per slot, in arrival order.

Drain first holds the stream's acks until it is quiet (``runtime.scheduler.dispatch`` says why: a
message the server already sent must be read and run, not left in the stream or nacked), then closes it
with ``await_callbacks_on_shutdown=True``: the client stops receiving, waits for the scheduler - the
held acks go out, in-flight jobs finish and are acked - and only then stops. A prefetched message is
never handed back (a nack would burn a delivery attempt): it starts as soon as its slot frees, drain or
not, and is acked like any other. When the slots change (a
pool was scaled) or the window does, the stream is replaced the same way: the old one drains, a new one
opens with the new flow control.

A consumer of one of several request queues (``runtime.scheduler.intake``) shares the replica's workers with the
others through a ``FairShare``: a slot takes a place there before it starts a job, and the job gives it back when
it ends on its worker (``runtime.scheduler.fair_share`` says who gets the next free one). A slot that finds no
place free completes the job it submitted ahead before it waits, so a place it holds is never kept by a thread
that is waiting for another.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from runtime.protocol.queues import DEFAULT_QUEUE
from runtime.scheduler.dispatch import SlotScheduler
from runtime.scheduler.fair_share import FairShare
from runtime.scheduler.packing import PACK_MAX_JOBS, tiny_job_id
from runtime.scheduler.records import Conclusion, Decision, Delivery, Settle, Started
from runtime.scheduler.window import Window, lease_s

# Pause before reopening a stream that ended on its own (seconds): short at first, since a broker that
# restarted answers NOT_FOUND only until its subscriptions are recreated, moments later; doubled on each
# failure in a row up to the maximum, so a broker that stays away gets no hot reconnect loop.
REOPEN_DELAY_S: Final = 0.25
REOPEN_MAX_DELAY_S: Final = 5.0
# A stream that lived this long before ending counts as a success: the next reopen starts short again.
REOPEN_RESET_S: Final = 30.0
# A drain request waits this long for its stream to stop receiving (seconds), so that intake has stopped
# when it returns. Normally the stream closes within a second; it stays open longer only while the client
# is too busy to read what the server already sent, and then the server sends nothing new.
DRAIN_CLOSE_WAIT_S: Final = 10.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Stream:
    """One streaming pull, the scheduler that runs its jobs, and whether its close has begun."""

    future: Any
    slots: SlotScheduler
    closing: threading.Event = field(default_factory=threading.Event)
    opened_at: float = field(default_factory=time.monotonic)


class _Deliveries:
    """Each message of one stream as a ``Delivery``, made once: a message waiting for a slot may be looked at
    by several slots' packs before it runs, and its body is parsed only the first time (``Delivery.request``).

    A delivery leaves when it is taken to run; what a closed stream never ran goes with the stream. Each entry
    holds its message too, so that no other message can take its ``id`` while it is kept.
    """

    def __init__(self, queue: str) -> None:
        self._queue = queue
        self._lock = threading.Lock()
        self._made: dict[int, tuple[Any, Delivery]] = {}

    def peek(self, message: Any) -> Delivery:
        """``message`` as a delivery, kept for when it runs."""
        with self._lock:
            if (kept := self._made.get(id(message))) is None:
                kept = self._made[id(message)] = (message, _delivery(message, self._queue))
        return kept[1]

    def take(self, message: Any) -> Delivery:
        """``message`` as a delivery, forgotten here: it runs now."""
        with self._lock:
            kept = self._made.pop(id(message), None)
        return kept[1] if kept is not None else _delivery(message, self._queue)


class Consumer:
    """Owns the streaming pull: ``start``, ``drain``, ``resume``, ``resize``, ``stop`` (all idempotent)."""

    def __init__(self, subscriber: Any, subscription: str,
                 process: Callable[[Delivery], Decision | Conclusion | Started], slots: int, *,
                 finish: Callable[[Sequence[Conclusion]], list[Decision]] | None = None,
                 pack: Callable[[Sequence[Delivery]], list[Decision | Conclusion] | Started] | None = None,
                 queue: str = DEFAULT_QUEUE, fair: FairShare | None = None) -> None:
        """``process`` runs a delivery's job, or starts it (``Started``: the slot takes its next message while
        the job is in flight); ``finish`` concludes those that come back as ``Conclusion`` (needed if any
        does); ``pack``, if given, runs or starts tiny jobs waiting together (``runtime.scheduler.packing``).
        ``queue`` is the request queue the subscription belongs to (each delivery carries it); ``fair``, if given,
        is the arbiter whose place each job takes before it starts (shared with the other queues' consumers)."""
        if slots < 1:
            raise ValueError("a consumer needs at least one slot")
        self._subscriber = subscriber
        self._subscription = subscription
        self._process = process
        self._finish = finish
        self._pack = pack
        self._slots = slots
        self._queue = queue
        self._fair = fair
        self._lock = threading.Lock()
        self._stream: _Stream | None = None
        self._draining: list[_Stream] = []
        self._wanted = False
        self._stopping = threading.Event()
        self._abort = threading.Event()  # a shutdown ran out of time: close draining streams now
        self._reopen_delay_s = REOPEN_DELAY_S  # the next pause before reopening a stream that ended
        self._window = Window()

    @property
    def slots(self) -> int:
        """Jobs run at once."""
        return self._slots

    @property
    def places(self) -> int:
        """Messages the open stream may hold: ``slots`` x its window's places per slot."""
        return self._slots * self._window.places_per_slot

    @property
    def waiting(self) -> int:
        """Messages received and waiting for a slot, in the open stream and in those still draining."""
        with self._lock:
            streams = [*self._draining, *([self._stream] if self._stream is not None else [])]
        return sum(stream.slots.waiting for stream in streams)

    @property
    def running(self) -> bool:
        """Whether the stream is open and pulling."""
        with self._lock:
            return self._stream is not None and not self._stream.future.done()

    @property
    def draining(self) -> bool:
        """Whether intake is stopped on purpose (maintenance drain)."""
        with self._lock:
            return not self._wanted

    def start(self) -> None:
        """Open the stream (no-op if it is open)."""
        self._stopping.clear()
        self._abort.clear()
        with self._lock:
            self._wanted = True
            if self._stream is not None and not self._stream.future.done():
                return
            self._window.reset()
            self._stream = self._open()
        log.info("consuming %s with %d slot(s)", self._subscription, self._slots)

    def resize(self, slots: int) -> None:
        """Follow a new number of slots: drain the open stream (nothing nacked) and open one with ``slots``.

        The old stream's jobs finish while the new stream admits ``slots`` messages, so for that while
        this replica runs up to old jobs + ``slots``; Dask queues the surplus.
        """
        if slots < 1:
            raise ValueError("a consumer needs at least one slot")
        with self._lock:
            if slots == self._slots:
                return
            previous, self._slots = self._slots, slots
            old = self._stream if self._wanted else None
            if old is not None:
                self._draining.append(old)
                self._stream = self._open()
        if old is not None:
            self._retire(old)
        log.info("slots %d -> %d", previous, slots)

    def drain(self) -> None:
        """Stop intake; in-flight jobs finish and are acked; nothing is nacked."""
        self._stopping.set()
        with self._lock:
            self._wanted = False
            stream, self._stream = self._stream, None
            if stream is not None:
                self._draining.append(stream)
        if stream is not None:
            self._retire(stream)
            stream.closing.wait(DRAIN_CLOSE_WAIT_S)
            log.info("draining: intake stopped, in-flight jobs finish")

    def resume(self) -> None:
        """Resume intake after a drain."""
        self.start()

    def wait_drained(self, timeout_s: float | None = None) -> bool:
        """Block until every closing stream has finished its in-flight jobs."""
        with self._lock:
            closing = list(self._draining)
        for stream in closing:
            try:
                stream.future.result(timeout=timeout_s)
            except TimeoutError:
                return False
            except Exception:  # a stream that ended with an error is closed as well
                log.debug("closed stream ended with an error", exc_info=True)
        with self._lock:
            self._draining = [s for s in self._draining if not s.future.done()]
        return True

    def stop(self, timeout_s: float | None = None) -> bool:
        """Drain and wait; for shutdown. Past ``timeout_s`` the streams close at once (unfinished jobs are
        redelivered after their lease) and False is returned."""
        started = time.monotonic()
        self.drain()  # may wait up to DRAIN_CLOSE_WAIT_S of the timeout for intake to stop
        remaining = None if timeout_s is None else max(0.0, timeout_s - (time.monotonic() - started))
        if self.wait_drained(remaining):
            return True
        self._abort.set()
        if self._fair is not None:
            self._fair.wake()  # slots waiting for a place give up: their messages are redelivered
        return False

    def _open(self) -> _Stream:
        """Subscribe with the current slots; the caller holds ``_lock``."""
        from google.cloud.pubsub_v1.types import FlowControl

        per_slot = self._window.places_per_slot
        places = self._slots * per_slot
        slots = SlotScheduler(self._slots, places=places)
        deliveries = _Deliveries(self._queue)
        future = self._subscriber.subscribe(
            self._subscription,
            callback=lambda message: self._on_message(slots, deliveries, message),
            flow_control=FlowControl(max_messages=places, max_lease_duration=lease_s(per_slot)),
            scheduler=slots,
            await_callbacks_on_shutdown=True,
        )
        future.add_done_callback(self._on_stream_end)
        return _Stream(future, slots)

    def _retire(self, stream: _Stream) -> None:
        stream.slots.hold()
        threading.Thread(target=self._close_when_quiet, args=(stream,), name="gpurt-stream-close",
                         daemon=True).start()

    def _close_when_quiet(self, stream: _Stream) -> None:
        stream.slots.wait_quiet(self._abort)
        stream.future.cancel()  # the client's shutdown thread releases the held acks and awaits the jobs
        stream.closing.set()

    def _on_message(self, slots: SlotScheduler, made: _Deliveries, message: Any) -> None:
        messages = [message]
        if not self._take_place(slots):
            slots.settle(message, False)  # a shutdown past its deadline: redelivered, as a running job would be
            return
        try:
            first = tiny_job_id(made.peek(message)) if self._pack is not None else None
            if first is not None:
                # The tiny jobs waiting right behind it run with it, in one task (docs/scheduler.md, "Packing").
                # A second message of a job id already in the pack stays behind: it must wait for that job's
                # result, which a pack's own twin would wait for in vain.
                packed = {first}

                def wanted(waiting: Any) -> bool:
                    job_id = tiny_job_id(made.peek(waiting))
                    if job_id is None or job_id in packed:
                        return False
                    packed.add(job_id)
                    return True
                messages += slots.take_waiting(wanted, PACK_MAX_JOBS - 1)
            if self._pack is not None:
                self._observe(slots, tiny=first is not None, jobs=len(messages))
            deliveries = [made.take(m) for m in messages]
            pack = self._pack
            begun = pack(deliveries) if pack is not None and len(deliveries) > 1 else self._process(deliveries[0])
        except Exception:  # the processor never raises; a malformed message object could
            log.exception("could not read a delivery; it will be redelivered")
            self._give_place()
            for m in messages:
                slots.settle(m, False)
            return
        started = begun if isinstance(begun, Started) else _done(begun)

        def complete() -> None:
            self._complete(slots, messages, started)
        if started.in_flight:
            # Its task is on the way to a worker: this slot's thread waits for the job it submitted before
            # (if any) and takes its next message, so the worker finds the next job queued (Submit ahead).
            slots.carry(complete, started.ready, started.on_ready, started.start_clock)
            return
        if not started.ready():
            slots.complete_carried()  # it will wait or run now: the job this slot submitted before comes first
        complete()

    def _complete(self, slots: SlotScheduler, messages: list[Any], started: Started) -> None:
        """Wait for ``started`` and settle its messages, or hand the jobs that ran to a concluding thread."""
        try:
            outcomes = started.outcomes()
        except Exception:  # the processor never raises; if it did, the messages are redelivered
            log.exception("a started job raised; it will be redelivered")
            for m in messages:
                slots.settle(m, False)
            return
        finally:
            self._give_place()  # its job ended on the worker: the next queue in line may start one
        concluding: list[tuple[Any, Conclusion]] = []
        for m, outcome in zip(messages, outcomes, strict=True):
            if isinstance(outcome, Conclusion):
                concluding.append((m, outcome))
            else:
                slots.settle(m, outcome.settle is Settle.ACK)
        if concluding:
            finish = self._finish
            if finish is None:
                raise RuntimeError("a consumer whose processor concludes jobs needs a finish")
            conclusions = [conclusion for _, conclusion in concluding]
            # This slot's thread takes its next message while a concluding thread stores and publishes.
            slots.conclude([m for m, _ in concluding], lambda: finish(conclusions))

    def _take_place(self, slots: SlotScheduler) -> bool:
        """Take a place on the workers from the arbiter for the job about to start; False: give up, shutting down."""
        fair = self._fair
        if fair is None or fair.try_acquire(self._queue):
            return True
        # None is free: the job this slot submitted ahead ends first, so that its place is not held by a thread
        # waiting for another (with every place held that way, no job would ever give one back).
        slots.complete_carried()
        return fair.acquire(self._queue, give_up=self._abort.is_set)

    def _give_place(self) -> None:
        if self._fair is not None:
            self._fair.release(self._queue)

    def _observe(self, slots: SlotScheduler, tiny: bool, jobs: int) -> None:
        """Count the jobs a slot of the open stream took; replace the stream when its window changes."""
        with self._lock:
            stream = self._stream
            if stream is None or stream.slots is not slots or not self._wanted:
                return  # a closing stream's jobs say nothing about the next one
            if not self._window.observe(tiny, jobs, time.monotonic()):
                return
            # Streams replaced earlier and closed since are forgotten here: a long run replaces many.
            self._draining = [s for s in self._draining if not s.future.done()]
            self._draining.append(stream)
            self._stream = self._open()
            places = self.places
        self._retire(stream)
        log.info("window %s: the stream now holds up to %d messages", "widened for tiny jobs" if tiny else "narrowed",
                 places)

    def _on_stream_end(self, future: Any) -> None:
        # Ended without a drain (the broker went away, a non-retryable error): open it again while
        # intake is wanted, so the consumer never silently stops.
        if future.cancelled():
            return
        error = future.exception() if future.done() else None
        with self._lock:
            ended = self._stream
            reopen = self._wanted and ended is not None and ended.future is future
            if reopen and ended is not None:
                self._stream = None
                if time.monotonic() - ended.opened_at >= REOPEN_RESET_S:
                    self._reopen_delay_s = REOPEN_DELAY_S
                delay_s = self._reopen_delay_s
                self._reopen_delay_s = min(2 * delay_s, REOPEN_MAX_DELAY_S)
        if error is not None:
            log.error("streaming pull ended: %s", error)
        if reopen:
            threading.Thread(target=self._reopen, args=(delay_s,), name="gpurt-consumer-reopen", daemon=True).start()

    def _reopen(self, delay_s: float) -> None:
        if self._stopping.wait(delay_s):
            return  # drained or stopped meanwhile
        try:
            self.start()
        except Exception:
            log.exception("could not reopen the streaming pull")


def _done(outcome: Decision | Conclusion | list[Decision | Conclusion]) -> Started:
    """What a processor that runs jobs to their end gave, as a ``Started`` that needs no waiting."""
    outcomes = outcome if isinstance(outcome, list) else [outcome]
    return Started(lambda: outcomes, ready=lambda: True)


def _delivery(message: Any, queue: str) -> Delivery:
    return Delivery(
        message_id=message.message_id,
        data=message.data,
        attributes=dict(message.attributes),
        delivery_attempt=message.delivery_attempt or 1,
        publish_time=message.publish_time,
        queue=queue,
    )
