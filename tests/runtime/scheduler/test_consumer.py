"""The consumer against an autospec of SubscriberClient: flow control, drain, reopen, ack/nack mapping."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from datetime import UTC, datetime
from unittest import mock

import pytest
from google.cloud.pubsub_v1 import SubscriberClient

from runtime.protocol.messages import MAX_TIMEOUT_S, JobRequest, parse_request
from runtime.protocol.queues import QueueSpec
from runtime.scheduler import consumer as consumer_module
from runtime.scheduler import dispatch, records
from runtime.scheduler.consumer import Consumer
from runtime.scheduler.dispatch import SlotScheduler
from runtime.scheduler.fair_share import FairShare
from runtime.scheduler.records import Decision, Delivery, Settle, Started
from runtime.scheduler.window import NARROW_PLACES_PER_SLOT, WIDE_PLACES_PER_SLOT, WIDEN_AFTER_TINY
from tests.runtime.scheduler.platform import wait_for


class StreamFuture(Future):
    """Behaves like StreamingPullFuture: cancel() records, the stream ends when the test says so."""

    def __init__(self) -> None:
        super().__init__()
        self.cancel_calls = 0

    def cancel(self) -> bool:
        self.cancel_calls += 1
        return True

    def cancelled(self) -> bool:
        return self.cancel_calls > 0


@pytest.fixture(autouse=True)
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "QUIET_GRACE_S", 0.05)


@pytest.fixture
def subscriber() -> mock.Mock:
    client = mock.create_autospec(SubscriberClient, instance=True)
    client.subscribe.side_effect = lambda *args, **kwargs: StreamFuture()
    return client


def test_flow_control_admits_slots_and_leases_cover_the_longest_job(subscriber: mock.Mock) -> None:
    Consumer(subscriber, "projects/p/subscriptions/s", lambda d: Decision(Settle.ACK, None), slots=3).start()
    kwargs = subscriber.subscribe.call_args.kwargs
    assert kwargs["flow_control"].max_messages == 9  # 3 running, 3 waiting (on a worker), 3 concluding
    # A held message waits for two jobs at most (the running one, one waiting), then runs its own.
    assert kwargs["flow_control"].max_lease_duration >= NARROW_PLACES_PER_SLOT * MAX_TIMEOUT_S
    # What makes a drain nack-free: the client awaits the scheduler, which runs even waiting messages.
    assert kwargs["await_callbacks_on_shutdown"] is True
    assert isinstance(kwargs["scheduler"], SlotScheduler)
    assert kwargs["scheduler"].shutdown(await_msg_callbacks=True) == []


def _max_messages(subscriber: mock.Mock) -> list[int]:
    return [c.kwargs["flow_control"].max_messages for c in subscriber.subscribe.call_args_list]


def test_new_slots_replace_the_stream_and_the_old_one_drains(subscriber: mock.Mock) -> None:
    consumer = Consumer(subscriber, "s", lambda d: Decision(Settle.ACK, None), slots=2)
    consumer.start()
    old = consumer._stream.future
    consumer.resize(2)
    assert _max_messages(subscriber) == [2 * NARROW_PLACES_PER_SLOT] and old.cancel_calls == 0  # unchanged: it stays
    consumer.resize(4)
    assert _max_messages(subscriber) == [2 * NARROW_PLACES_PER_SLOT, 4 * NARROW_PLACES_PER_SLOT] and consumer.slots == 4
    assert consumer._stream.future is not old and consumer.running
    wait_for(lambda: old.cancel_calls == 1, 5, "the quiet old stream to close")
    assert not consumer.wait_drained(0.01)  # the client is still finishing the old stream's jobs
    old.set_result(True)
    assert consumer.wait_drained(1)


def test_new_slots_while_drained_apply_when_intake_resumes(subscriber: mock.Mock) -> None:
    consumer = Consumer(subscriber, "s", lambda d: Decision(Settle.ACK, None), slots=2)
    consumer.start()
    consumer.drain()
    consumer.resize(1)
    assert _max_messages(subscriber) == [2 * NARROW_PLACES_PER_SLOT] and not consumer.running
    consumer.resume()
    assert _max_messages(subscriber) == [2 * NARROW_PLACES_PER_SLOT, NARROW_PLACES_PER_SLOT]
    with pytest.raises(ValueError, match="at least one slot"):
        consumer.resize(0)


def test_drain_cancels_the_stream_and_resume_opens_a_new_one(subscriber: mock.Mock) -> None:
    consumer = Consumer(subscriber, "s", lambda d: Decision(Settle.ACK, None), slots=1)
    consumer.start()
    first = consumer._stream.future
    consumer.drain()
    assert consumer.draining and not consumer.running
    wait_for(lambda: first.cancel_calls == 1, 5, "the quiet stream to close")
    first.set_result(True)  # the client finished its shutdown
    assert consumer.wait_drained(1)
    consumer.resume()
    assert subscriber.subscribe.call_count == 2 and consumer.running


def test_a_stream_that_dies_on_its_own_is_reopened(subscriber: mock.Mock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consumer_module, "REOPEN_DELAY_S", 0.01)
    consumer = Consumer(subscriber, "s", lambda d: Decision(Settle.ACK, None), slots=1)
    consumer.start()
    consumer._stream.future.set_exception(RuntimeError("broker went away"))
    wait_for(lambda: subscriber.subscribe.call_count == 2, 5, "a reopened stream")
    consumer.drain()
    consumer._draining[-1].future.set_result(True)


def test_messages_become_deliveries_and_decisions_become_ack_or_nack(subscriber: mock.Mock) -> None:
    seen: list[Delivery] = []
    decisions = iter([Settle.ACK, Settle.NACK])
    consumer = Consumer(subscriber, "s", lambda d: seen.append(d) or Decision(next(decisions), None), slots=1)
    consumer.start()
    callback = subscriber.subscribe.call_args.kwargs["callback"]
    messages = [mock.Mock(message_id=str(i), data=b"{}", attributes={"job_id": "j"}, delivery_attempt=attempt,
                          publish_time=datetime.now(UTC)) for i, attempt in enumerate([None, 3])]
    for message in messages:
        callback(message)
    assert [d.delivery_attempt for d in seen] == [1, 3]  # no dead-letter policy reads as attempt 1
    messages[0].ack.assert_called_once_with()
    messages[1].nack.assert_called_once_with()
    messages[0].nack.assert_not_called()


def test_a_drain_keeps_a_busy_stream_open_until_the_client_reads_again(subscriber: mock.Mock,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consumer_module, "DRAIN_CLOSE_WAIT_S", 0.01)
    release = threading.Event()
    consumer = Consumer(subscriber, "s", lambda d: release.wait(5) and Decision(Settle.ACK, None), slots=5)
    consumer.start()
    future, kwargs = consumer._stream.future, subscriber.subscribe.call_args.kwargs
    messages = [mock.Mock(message_id=str(i), data=b"{}", attributes={}, delivery_attempt=1, publish_time=None)
                for i in range(5 * NARROW_PLACES_PER_SLOT - 1)]  # 5 running, the others waiting for a slot
    for message in messages:
        kwargs["scheduler"].schedule(kwargs["callback"], message)
    consumer.drain()
    assert consumer.draining and not consumer.running
    time.sleep(0.3)  # give a wrong implementation time to close early
    assert future.cancel_calls == 0  # all places but one busy: the client is not reading what the server may send
    release.set()
    wait_for(lambda: future.cancel_calls == 1, 5, "the stream to close once the client reads again")
    for message in messages:
        message.drop.assert_called_once_with()  # places freed while the acks wait for the close
        message.ack.assert_not_called()
    assert kwargs["scheduler"].shutdown(await_msg_callbacks=True) == []
    for message in messages:
        message.ack.assert_called_once_with()


def test_a_shutdown_past_its_timeout_closes_the_streams_at_once(subscriber: mock.Mock) -> None:
    release = threading.Event()
    consumer = Consumer(subscriber, "s", lambda d: release.wait(5) and Decision(Settle.ACK, None), slots=1)
    consumer.start()
    future, kwargs = consumer._stream.future, subscriber.subscribe.call_args.kwargs
    kwargs["scheduler"].schedule(kwargs["callback"], mock.Mock(data=b"{}", delivery_attempt=1, publish_time=None))
    assert consumer.stop(timeout_s=0.1) is False
    wait_for(lambda: future.cancel_calls == 1, 5, "the stream closed without waiting for quiet")
    release.set()


def _noop_message(job_id: str, sleep_s: float = 0.0) -> mock.Mock:
    body = f'{{"job_id": "{job_id}", "type": "noop", "params": {{"sleep_s": {sleep_s}}}}}'.encode()
    return mock.Mock(message_id=job_id, data=body, attributes={}, delivery_attempt=1, publish_time=None)


def test_a_pack_takes_the_tiny_jobs_behind_its_first_but_no_twin_and_nothing_past_a_big_job(
        subscriber: mock.Mock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consumer_module, "DRAIN_CLOSE_WAIT_S", 0.01)
    release = threading.Event()
    alone: list[str] = []
    packs: list[list[str]] = []

    def process(delivery: Delivery) -> Decision:
        alone.append(delivery.message_id)
        if delivery.message_id == "busy":
            assert release.wait(5)
        return Decision(Settle.ACK, delivery.message_id)

    def pack(deliveries: list[Delivery]) -> list[Decision]:
        packs.append([d.message_id for d in deliveries])
        return [Decision(Settle.ACK, d.message_id) for d in deliveries]

    consumer = Consumer(subscriber, "s", process, slots=1, pack=pack)
    consumer.start()
    kwargs = subscriber.subscribe.call_args.kwargs
    scheduler, callback = kwargs["scheduler"], kwargs["callback"]
    scheduler.schedule(callback, _noop_message("busy", sleep_s=1.0))  # not tiny: runs alone, the rest waits
    wait_for(lambda: alone == ["busy"], 5, "the slot busy")
    waiting = [_noop_message("a"), _noop_message("b"), _noop_message("a"), _noop_message("c"),
               _noop_message("big", sleep_s=1.0), _noop_message("d")]
    for message in waiting:
        scheduler.schedule(callback, message)
    release.set()
    wait_for(lambda: all(m.ack.called for m in waiting), 5, "every message acked")
    # "a" leads a pack that takes "b" and skips nothing: it stops at the twin of "a", which then leads its own.
    assert packs[0] == ["a", "b"]
    assert ["a", "c"] in packs and alone[1:] == ["big", "d"]  # the big job ran alone, nothing overtook it
    consumer.stop(timeout_s=1)


def test_a_run_of_tiny_jobs_widens_the_stream_and_a_large_job_narrows_it(subscriber: mock.Mock) -> None:
    def process(delivery: Delivery) -> Decision:
        return Decision(Settle.ACK, delivery.message_id)

    def pack(deliveries: list[Delivery]) -> list[Decision]:
        return [Decision(Settle.ACK, d.message_id) for d in deliveries]

    consumer = Consumer(subscriber, "s", process, slots=2, pack=pack)
    consumer.start()
    narrow = consumer._stream
    kwargs = subscriber.subscribe.call_args.kwargs
    tiny = [_noop_message(f"t{i}") for i in range(WIDEN_AFTER_TINY)]
    for message in tiny:
        kwargs["callback"](message)  # one by one, as slots take them
    assert _max_messages(subscriber) == [2 * NARROW_PLACES_PER_SLOT, 2 * WIDE_PLACES_PER_SLOT]
    assert consumer.places == 2 * WIDE_PLACES_PER_SLOT
    # The job that widened it ran on the narrow stream, which now drains: its ack waits for the close.
    assert all(m.ack.called for m in tiny[:-1]) and not tiny[-1].ack.called
    wait_for(lambda: narrow.future.cancel_calls == 1, 5, "the narrow stream to drain and close")
    narrow.slots.shutdown(await_msg_callbacks=True)  # what the client does once the stream is cancelled
    assert tiny[-1].ack.called and not any(m.nack.called for m in tiny)
    narrow.future.set_result(True)  # the client finished its shutdown
    kwargs["callback"](_noop_message("late", sleep_s=1.0))  # a closing stream's job changes nothing
    assert len(_max_messages(subscriber)) == 2

    wide = consumer._stream
    subscriber.subscribe.call_args.kwargs["callback"](_noop_message("large", sleep_s=1.0))
    assert _max_messages(subscriber)[-1] == 2 * NARROW_PLACES_PER_SLOT and consumer.places == 2 * NARROW_PLACES_PER_SLOT
    assert consumer._draining == [wide]  # the closed narrow stream is forgotten: a long run replaces many
    wait_for(lambda: wide.future.cancel_calls == 1, 5, "the wide stream to drain and close")
    wide.future.set_result(True)
    consumer.stop(timeout_s=1)


def test_without_packing_the_stream_stays_narrow(subscriber: mock.Mock) -> None:
    consumer = Consumer(subscriber, "s", lambda d: Decision(Settle.ACK, None), slots=1)
    consumer.start()
    callback = subscriber.subscribe.call_args.kwargs["callback"]
    for i in range(2 * WIDEN_AFTER_TINY):
        callback(_noop_message(f"t{i}"))
    assert _max_messages(subscriber) == [NARROW_PLACES_PER_SLOT]
    consumer.stop(timeout_s=0.1)


def test_each_message_is_parsed_once_though_packs_look_at_it_first(subscriber: mock.Mock,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # issue #35: the packing check and the processor each parsed a body (each up to a megabyte)
    monkeypatch.setattr(consumer_module, "DRAIN_CLOSE_WAIT_S", 0.01)
    parsed: list[bytes] = []
    monkeypatch.setattr(records, "parse_request", lambda data: parsed.append(data) or parse_request(data))
    release = threading.Event()

    def process(delivery: Delivery) -> Decision:
        assert isinstance(delivery.request, JobRequest)  # the processor reads the parse the consumer made
        if delivery.message_id == "busy":
            assert release.wait(5)
        return Decision(Settle.ACK, delivery.message_id)

    def pack(deliveries: list[Delivery]) -> list[Decision]:
        return [process(d) for d in deliveries]

    consumer = Consumer(subscriber, "s", process, slots=1, pack=pack)
    consumer.start()
    kwargs = subscriber.subscribe.call_args.kwargs
    scheduler, callback = kwargs["scheduler"], kwargs["callback"]
    scheduler.schedule(callback, _noop_message("busy", sleep_s=1.0))
    wait_for(lambda: len(parsed) == 1, 5, "the slot busy")
    # a pack looks at "big" (not tiny: it stops there), then "big" runs alone, then "b" leads its own
    waiting = [_noop_message("a"), _noop_message("big", sleep_s=1.0), _noop_message("b")]
    for message in waiting:
        scheduler.schedule(callback, message)
    release.set()
    wait_for(lambda: all(m.ack.called for m in waiting), 5, "every message acked")
    assert sorted(parsed) == sorted(m.data for m in [_noop_message("busy", sleep_s=1.0), *waiting])
    consumer.stop(timeout_s=1)


def test_a_slot_that_finds_no_place_completes_the_job_it_submitted_ahead_before_it_waits(
        subscriber: mock.Mock) -> None:
    # One slot, two places, one held by another queue's job: "a" takes the last place and is carried (its task on a
    # worker), then "b" finds none. Were the slot to wait for a place while carrying "a", "a"'s place would never
    # be given back: it completes "a" first, and "b" starts once "a" has ended.
    fair = FairShare([QueueSpec("desk"), QueueSpec("other")], slots=1)
    assert fair.try_acquire("other")
    ended = {job_id: threading.Event() for job_id in ("a", "b")}
    wakes: dict[str, Callable[[], None]] = {}
    started: list[Delivery] = []

    def end(job_id: str) -> None:  # the job ends on its worker, which calls back as Dask's future does
        ended[job_id].set()
        wakes[job_id]()

    def process(delivery: Delivery) -> Started:
        started.append(delivery)
        job_id = delivery.message_id
        return Started(lambda: [Decision(Settle.ACK, job_id)] if ended[job_id].wait(5) else [],
                       in_flight=True, ready=ended[job_id].is_set,
                       on_ready=lambda wake: wakes.__setitem__(job_id, wake), start_clock=lambda: math.inf)

    consumer = Consumer(subscriber, "s", process, slots=1, queue="desk", fair=fair)
    consumer.start()
    kwargs = subscriber.subscribe.call_args.kwargs
    scheduler, callback = kwargs["scheduler"], kwargs["callback"]
    first, second = _noop_message("a", sleep_s=1.0), _noop_message("b", sleep_s=1.0)
    scheduler.schedule(callback, first)
    wait_for(lambda: [d.message_id for d in started] == ["a"], 5, "a started")
    scheduler.schedule(callback, second)
    wait_for(lambda: scheduler.waiting == 0, 5, "the slot taking b")
    assert [d.message_id for d in started] == ["a"]  # no place for b until a ends
    end("a")
    wait_for(lambda: [d.message_id for d in started] == ["a", "b"], 5, "b started once a ended")
    assert first.ack.called and all(d.queue == "desk" for d in started)
    end("b")
    wait_for(lambda: second.ack.called, 5, "b acked")
    wait_for(lambda: [s.held for s in fair.shares()] == [0, 1], 5, "desk's places given back")
    consumer.stop(timeout_s=1)
