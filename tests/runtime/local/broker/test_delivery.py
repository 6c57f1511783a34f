"""Unit tests of one subscription's delivery state machine, on a hand-driven clock."""

from __future__ import annotations

import threading

import pytest

from runtime.local.broker import proto
from runtime.local.broker.delivery import DeliveryPolicy, LeaseOwner, QueueStats, SubscriptionQueue

SUBSCRIPTION = "projects/p/subscriptions/requests-sub"
DLQ = "projects/p/topics/requests-dlq"


class ManualClock:
    """A clock that moves only when told to; protocol seconds are real seconds."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return 1.7e9 + self.now

    def span(self, protocol_seconds: float) -> float:
        return protocol_seconds

    def lease_span(self, protocol_seconds: float) -> float:
        return protocol_seconds


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def make_queue(clock: ManualClock, **policy: object) -> SubscriptionQueue:
    settings = {"ack_deadline_s": 10, "retention_s": 3600.0, **policy}
    return SubscriptionQueue(SUBSCRIPTION, DeliveryPolicy(**settings), clock, threading.Lock())


def publish(queue: SubscriptionQueue, clock: ManualClock, message_id: str, data: bytes = b"x") -> None:
    queue.enqueue(proto.PubsubMessage(message_id=message_id, data=data), clock.wall(), clock.monotonic())


def test_backoff_doubles_from_the_minimum_up_to_the_maximum() -> None:
    policy = DeliveryPolicy(ack_deadline_s=10, retention_s=600, min_backoff_s=10, max_backoff_s=600)
    assert [policy.backoff_s(n) for n in range(1, 9)] == [10, 20, 40, 80, 160, 320, 600, 600]
    assert DeliveryPolicy(ack_deadline_s=10, retention_s=600).backoff_s(3) == 0


def test_expired_lease_waits_out_the_backoff_then_redelivers(clock: ManualClock) -> None:
    queue = make_queue(clock, min_backoff_s=10, max_backoff_s=600)
    with queue.lock:
        publish(queue, clock, "1")
        [first] = queue.take(10, deadline_s=10)
        clock.now += 10
        queue.sweep(clock.now)
        assert (queue.stats().undelivered, queue.stats().outstanding) == (1, 0)
        assert not queue.has_ready()
        assert queue.next_due() == clock.now + 10
        clock.now += 10
        queue.sweep(clock.now)
        [second] = queue.take(10, deadline_s=10)
    assert second.message.message_id == first.message.message_id
    assert second.ack_id != first.ack_id


def test_modify_ack_deadline_shortens_a_lease(clock: ManualClock) -> None:
    queue = make_queue(clock, ack_deadline_s=60)
    with queue.lock:
        publish(queue, clock, "1")
        [first] = queue.take(1, deadline_s=60)
        queue.modify([first.ack_id], 3)
        assert queue.next_due() == clock.now + 3  # the sweeper is woken for the earlier deadline
        clock.now += 2.9
        queue.sweep(clock.now)
        assert queue.stats().outstanding == 1
        clock.now += 0.2
        queue.sweep(clock.now)
        [second] = queue.take(1, deadline_s=60)
        assert second.message.message_id == first.message.message_id
        queue.modify([second.ack_id], 30)  # lengthened again: the stale 60 s filing must not end it early
        clock.now += 29
        queue.sweep(clock.now)
        assert queue.stats().outstanding == 1


def test_modify_ack_deadline_extends_and_stale_ack_ids_are_ignored(clock: ManualClock) -> None:
    queue = make_queue(clock)
    with queue.lock:
        publish(queue, clock, "1")
        [first] = queue.take(1, deadline_s=10)
        clock.now += 5
        queue.modify([first.ack_id], 30)
        clock.now += 6
        queue.sweep(clock.now)  # past the first deadline, inside the extension
        assert queue.stats().outstanding == 1
        clock.now += 30
        queue.sweep(clock.now)
        [second] = queue.take(1, deadline_s=10)
        queue.ack([first.ack_id])  # belongs to the superseded delivery
        assert queue.stats().outstanding == 1
        queue.ack([second.ack_id])
        assert queue.stats() == QueueStats(undelivered=0, outstanding=0, dead_lettered=0, acked_retained=0)


def test_dead_letter_after_the_last_attempt(clock: ManualClock) -> None:
    queue = make_queue(clock, dead_letter_topic=DLQ, max_delivery_attempts=5)
    with queue.lock:
        publish(queue, clock, "1", b"poison")
        attempts, dead = [], []
        while not dead:
            [received] = queue.take(1, deadline_s=10)
            attempts.append(received.delivery_attempt)
            dead = queue.modify([received.ack_id], 0)
        assert attempts == [1, 2, 3, 4, 5]
        [letter] = dead
        assert (letter.source, letter.topic, letter.message.data, letter.delivery_attempt) == (
            SUBSCRIPTION, DLQ, b"poison", 5)
        assert queue.stats().dead_lettered == 1
        assert not queue.has_ready()


def test_flow_control_owner_counts_leases_until_they_end(clock: ManualClock) -> None:
    queue = make_queue(clock)
    owner = LeaseOwner()
    with queue.lock:
        for i in range(3):
            publish(queue, clock, str(i), b"x" * 100)
        taken = queue.take(10, deadline_s=10, owner=owner, max_bytes=150)
        assert len(taken) == 1  # the byte budget admits one 100-byte message, never zero
        taken += queue.take(10, deadline_s=10, owner=owner)
        assert (owner.messages, owner.bytes) == (3, 3 * taken[0].message.ByteSize())
        queue.ack([taken[0].ack_id])
        queue.modify([taken[1].ack_id], 0)
        clock.now += 10
        queue.sweep(clock.now)
        assert (owner.messages, owner.bytes) == (0, 0)


def test_retention_drops_messages_in_any_state(clock: ManualClock) -> None:
    queue = make_queue(clock, retention_s=600, retain_acked=True)
    with queue.lock:
        for i in range(3):
            publish(queue, clock, str(i))
        acked, _still_leased = queue.take(2, deadline_s=600)
        queue.ack([acked.ack_id])
        assert queue.stats() == QueueStats(undelivered=1, outstanding=1, dead_lettered=0, acked_retained=1)
        clock.now += 600
        queue.sweep(clock.now)
        assert queue.stats() == QueueStats(undelivered=0, outstanding=0, dead_lettered=0, acked_retained=0)
        assert queue.next_due() is None


def test_seek_marks_older_messages_acked_and_replays_newer_ones(clock: ManualClock) -> None:
    queue = make_queue(clock, retain_acked=True)
    with queue.lock:
        publish(queue, clock, "old")
        clock.now += 5
        cut = clock.wall()
        publish(queue, clock, "new")
        queue.ack([m.ack_id for m in queue.take(2, deadline_s=10)])
        queue.seek_to_time(cut)
        assert [m.message.message_id for m in queue.take(10, deadline_s=10)] == ["new"]
        queue.seek_to_time(cut - 10)
        assert [m.message.message_id for m in queue.take(10, deadline_s=10)] == ["old", "new"]


def test_an_ordered_queue_delivers_one_message_per_key_in_order(clock: ManualClock) -> None:
    queue = make_queue(clock, ordered=True)
    with queue.lock:
        for message_id, key in [("1", "k"), ("2", "k"), ("3", "other"), ("4", ""), ("5", "k")]:
            queue.enqueue(proto.PubsubMessage(message_id=message_id, data=b"x", ordering_key=key), clock.wall(),
                          clock.monotonic())
        first = queue.take(10, deadline_s=10)
        assert [m.message.message_id for m in first] == ["1", "3", "4"]  # one per key, unkeyed free
        assert queue.stats().undelivered == 2  # parked messages are backlog
        queue.modify([first[0].ack_id], 0)  # nack "1": it comes back before "2"
        [again] = queue.take(10, deadline_s=10)
        assert again.message.message_id == "1"
        queue.ack([again.ack_id])
        assert [m.message.message_id for m in queue.take(10, deadline_s=10)] == ["2"]


def test_an_unordered_queue_ignores_ordering_keys(clock: ManualClock) -> None:
    queue = make_queue(clock)
    with queue.lock:
        for message_id in "12":
            queue.enqueue(proto.PubsubMessage(message_id=message_id, data=b"x", ordering_key="k"), clock.wall(),
                          clock.monotonic())
        assert len(queue.take(10, deadline_s=10)) == 2
