"""Publish, Pull, Acknowledge, ModifyAckDeadline, redelivery, backoff, retention and seek, through the
real client. Tests of time-driven behaviour use the emulator-only ``start_scaled`` fixture."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from google.api_core import exceptions
from google.protobuf import timestamp_pb2

from tests.runtime.local.broker import ON_THE_OFFICIAL_EMULATOR
from tests.runtime.local.broker.conftest import PubSub

pytestmark = [pytest.mark.integration, ON_THE_OFFICIAL_EMULATOR]

# At this scale a 10 s ack deadline lasts 0.5 s and a 600 s one 30 s: short deadlines expire quickly,
# long ones never expire within a test.
FAST = 0.05


def test_publish_pull_ack_round_trip(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic)
    before = time.time()
    message_id = pubsub.publish(topic, b'{"job_id": "j1"}', job_id="j1", type="noop")

    [received] = pubsub.pull_within(sub, 5)
    assert received.message.data == b'{"job_id": "j1"}'
    assert dict(received.message.attributes) == {"job_id": "j1", "type": "noop"}
    assert received.message.message_id == message_id
    assert before - 1 <= received.message.publish_time.timestamp() <= time.time() + 1
    pubsub.subscriber.acknowledge(subscription=sub, ack_ids=[received.ack_id])


def test_every_subscription_gets_its_own_copy(pubsub: PubSub) -> None:
    topic = pubsub.topic("results")
    subs = [pubsub.subscription(f"reader-{i}", topic) for i in range(2)]
    pubsub.publish(topic, b"r1")
    assert [[m.message.data for m in pubsub.pull_within(sub, 5)] for sub in subs] == [[b"r1"], [b"r1"]]


def test_a_subscription_sees_only_messages_published_after_it(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    pubsub.publish(topic, b"nobody-listens")  # dropped: the topic has no subscription yet
    sub = pubsub.subscription("late-sub", topic)
    pubsub.publish(topic, b"after")
    assert [m.message.data for m in pubsub.pull_within(sub, 1, want=2)] == [b"after"]


def _leased(start_scaled: Callable[[float], PubSub], data: bytes) -> tuple[PubSub, str, Any]:
    """A broker at the fast time scale, ``data`` published to a subscription with a 10 s ack deadline and pulled
    once: (broker, subscription, the received message, now leased)."""
    pubsub = start_scaled(FAST)
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic, ack_deadline_seconds=10)
    pubsub.publish(topic, data)
    [received] = pubsub.pull_within(sub, 5)
    return pubsub, sub, received


def test_acked_messages_are_not_redelivered(start_scaled: Callable[[float], PubSub]) -> None:
    pubsub, sub, received = _leased(start_scaled, b"done")
    pubsub.subscriber.acknowledge(subscription=sub, ack_ids=[received.ack_id])
    assert pubsub.pull_within(sub, 1.5) == []  # three ack deadlines


def test_expired_ack_deadline_redelivers(start_scaled: Callable[[float], PubSub]) -> None:
    pubsub, sub, first = _leased(start_scaled, b"slow")
    leased_at = time.monotonic()

    [again] = pubsub.pull_within(sub, 5)
    assert time.monotonic() - leased_at >= 10 * FAST * 0.9
    assert again.message.message_id == first.message.message_id
    assert again.ack_id != first.ack_id


def test_modify_ack_deadline_extends_the_lease_and_zero_nacks(start_scaled: Callable[[float], PubSub]) -> None:
    pubsub, sub, received = _leased(start_scaled, b"long-job")

    pubsub.subscriber.modify_ack_deadline(subscription=sub, ack_ids=[received.ack_id], ack_deadline_seconds=60)
    assert pubsub.pull_within(sub, 1.5) == []  # past the original deadline, within the extension

    pubsub.subscriber.modify_ack_deadline(subscription=sub, ack_ids=[received.ack_id], ack_deadline_seconds=0)
    [redelivered] = pubsub.pull_within(sub, 1)  # a nack without retry policy redelivers at once
    assert redelivered.message.message_id == received.message.message_id


def test_a_shortened_lease_expires_at_the_new_deadline(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic, ack_deadline_seconds=60)
    pubsub.publish(topic, b"give-back-soon")
    [received] = pubsub.pull_within(sub, 5)

    pubsub.subscriber.modify_ack_deadline(subscription=sub, ack_ids=[received.ack_id], ack_deadline_seconds=3)
    shortened_at = time.monotonic()
    [again] = pubsub.pull_within(sub, 10)  # long before the original 60 s
    assert again.message.message_id == received.message.message_id
    assert time.monotonic() - shortened_at >= 3 * 0.9


def test_nack_redelivers_after_exponential_backoff(start_scaled: Callable[[float], PubSub]) -> None:
    pubsub = start_scaled(FAST)
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic, ack_deadline_seconds=600,
                              retry_policy={"minimum_backoff": {"seconds": 10}, "maximum_backoff": {"seconds": 600}})
    pubsub.publish(topic, b"flaky")
    gaps = []
    [received] = pubsub.pull_within(sub, 5)
    for _ in range(2):
        nacked_at = time.monotonic()
        pubsub.subscriber.modify_ack_deadline(subscription=sub, ack_ids=[received.ack_id], ack_deadline_seconds=0)
        [received] = pubsub.pull_within(sub, 10)
        gaps.append(time.monotonic() - nacked_at)
    # 10 s then 20 s of protocol time: 0.5 s then 1 s here.
    assert gaps[0] >= 10 * FAST * 0.9
    assert gaps[1] >= 20 * FAST * 0.9


def _dead_lettering(pubsub: PubSub) -> tuple[str, str, str]:
    """A request topic whose subscription dead-letters after five deliveries; (topic, subscription, DLQ's)."""
    topic, dlq = pubsub.topic("requests"), pubsub.topic("requests-dlq")
    dlq_sub = pubsub.subscription("requests-dlq-sub", dlq)
    sub = pubsub.subscription("requests-sub", topic,
                              dead_letter_policy={"dead_letter_topic": dlq, "max_delivery_attempts": 5})
    return topic, sub, dlq_sub


def _fail_every_delivery(pubsub: PubSub, sub: str) -> list:
    """Pull the one message and nack it, five times (every delivery the policy allows); returns what came."""
    deliveries = []
    for _ in range(5):
        [received] = pubsub.pull_within(sub, 5)
        deliveries.append(received)
        pubsub.subscriber.modify_ack_deadline(subscription=sub, ack_ids=[received.ack_id], ack_deadline_seconds=0)
    return deliveries


def test_dead_letter_after_max_attempts(pubsub: PubSub) -> None:
    topic, sub, dlq_sub = _dead_lettering(pubsub)
    pubsub.publish(topic, b"poison", job_id="p1")

    assert [received.delivery_attempt for received in _fail_every_delivery(pubsub, sub)] == [1, 2, 3, 4, 5]
    assert pubsub.pull_within(sub, 0.5) == []  # no sixth delivery

    [dead] = pubsub.pull_within(dlq_sub, 5)
    assert dead.message.data == b"poison"
    assert dead.message.attributes["job_id"] == "p1"
    # The service's own record of where the message came from.
    assert dead.message.attributes["CloudPubSubDeadLetterSourceDeliveryCount"] == "5"
    assert dead.message.attributes["CloudPubSubDeadLetterSourceSubscription"] == "requests-sub"
    assert dead.message.attributes["CloudPubSubDeadLetterSourceSubscriptionProject"] == pubsub.project


@pytest.mark.official_differs("it forwards a message to the dead-letter topic only when its subscription is pulled "
                              "again after the last failed delivery; the service forwards on its own")
def test_dead_letter_is_forwarded_without_another_pull(pubsub: PubSub) -> None:
    topic, sub, dlq_sub = _dead_lettering(pubsub)
    pubsub.publish(topic, b"poison")
    _fail_every_delivery(pubsub, sub)
    [dead] = pubsub.pull_within(dlq_sub, 3)  # the source subscription is not pulled again
    assert dead.message.data == b"poison"


@pytest.mark.official_differs("it writes the source publish time as 2026-11-23T19:35:41.311Z; the service "
                              "writes 2026-11-23T19:35:41.311+00:00")
def test_dead_letter_publish_time_attribute_is_worded_like_the_service(pubsub: PubSub) -> None:
    topic, sub, dlq_sub = _dead_lettering(pubsub)
    published = pubsub.publish(topic, b"poison")
    deliveries = _fail_every_delivery(pubsub, sub)
    assert {received.message.message_id for received in deliveries} == {published}
    assert pubsub.pull_within(sub, 0.5) == []
    [dead] = pubsub.pull_within(dlq_sub, 5)
    publish_time = deliveries[-1].message.publish_time.isoformat(timespec="milliseconds")
    assert dead.message.attributes["CloudPubSubDeadLetterSourceTopicPublishTime"] == publish_time


@pytest.mark.slow
def test_retention_drops_old_messages(start_scaled: Callable[[float], PubSub]) -> None:
    scale = 0.002  # the minimum retention, 600 s, lasts 1.2 s
    pubsub = start_scaled(scale)
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic, ack_deadline_seconds=600,
                              message_retention_duration={"seconds": 600})
    pubsub.publish(topic, b"stale")
    time.sleep(600 * scale * 1.2)  # let the retention period pass
    pubsub.publish(topic, b"fresh")
    assert [m.message.data for m in pubsub.pull_within(sub, 0.5, want=2)] == [b"fresh"]


def _seek(pubsub: PubSub, sub: str, seconds_since_epoch: float) -> None:
    target = timestamp_pb2.Timestamp()
    target.FromNanoseconds(int(seconds_since_epoch * 1e9))
    pubsub.subscriber.seek(request={"subscription": sub, "time": target})


def _pull_and_ack_all(pubsub: PubSub, sub: str, want: int, seconds: float = 5) -> list[bytes]:
    received = pubsub.pull_within(sub, seconds, want=want)
    if received:
        pubsub.subscriber.acknowledge(subscription=sub, ack_ids=[m.ack_id for m in received])
    return [m.message.data for m in received]


def test_seek_to_a_past_time_replays_retained_acked_messages(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic, retain_acked_messages=True)
    pubsub.publish(topic, b"m1")
    [received] = pubsub.pull_within(sub, 5)
    pubsub.subscriber.acknowledge(subscription=sub, ack_ids=[received.ack_id])
    first_published = received.message.publish_time.timestamp()
    time.sleep(0.01)  # so that m2's publish time falls after first_published + 1 ms
    pubsub.publish(topic, b"m2")
    assert _pull_and_ack_all(pubsub, sub, 1) == [b"m2"]

    _seek(pubsub, sub, first_published + 1e-3)
    assert _pull_and_ack_all(pubsub, sub, 2, seconds=0.5) == [b"m2"]
    _seek(pubsub, sub, first_published - 1)
    assert sorted(_pull_and_ack_all(pubsub, sub, 2)) == [b"m1", b"m2"]  # redelivery order is not guaranteed


def test_seek_cannot_replay_acked_messages_that_were_not_retained(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic)
    started = time.time() - 1
    pubsub.publish(topic, b"m1")
    assert _pull_and_ack_all(pubsub, sub, 1) == [b"m1"]
    _seek(pubsub, sub, started)
    assert pubsub.pull_within(sub, 0.5) == []


def test_seek_to_a_snapshot_restores_its_unacked_messages(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic)
    pubsub.publish(topic, b"m1")
    pubsub.publish(topic, b"m2")
    [first] = pubsub.pull_within(sub, 5)
    pubsub.subscriber.acknowledge(subscription=sub, ack_ids=[first.ack_id])
    snapshot_path = pubsub.subscriber.snapshot_path(pubsub.project, "before-the-deploy")
    snapshot = pubsub.subscriber.create_snapshot(request={"name": snapshot_path, "subscription": sub})
    assert snapshot.topic == topic
    pubsub.publish(topic, b"m3")  # after the snapshot: it holds this one too
    acked = _pull_and_ack_all(pubsub, sub, 2)
    assert sorted(acked) == [b"m2", b"m3"]

    pubsub.subscriber.seek(request={"subscription": sub, "snapshot": snapshot_path})
    assert sorted(_pull_and_ack_all(pubsub, sub, 3, seconds=1)) == [b"m2", b"m3"]  # m1 was acked before it
    listed = pubsub.subscriber.list_snapshots(request={"project": f"projects/{pubsub.project}"})
    assert [s.name for s in listed] == [snapshot_path]
    pubsub.subscriber.delete_snapshot(snapshot=snapshot_path)
    with pytest.raises(exceptions.NotFound):
        pubsub.subscriber.seek(request={"subscription": sub, "snapshot": snapshot_path})


def test_a_snapshot_seeks_only_subscriptions_of_its_topic(pubsub: PubSub) -> None:
    sub = pubsub.subscription("requests-sub", pubsub.topic("requests"))
    other = pubsub.subscription("results-sub", pubsub.topic("results"))
    snapshot_path = pubsub.subscriber.snapshot_path(pubsub.project, "requests-snap")
    pubsub.subscriber.create_snapshot(request={"name": snapshot_path, "subscription": sub})
    with pytest.raises(exceptions.BadRequest):
        pubsub.subscriber.seek(request={"subscription": other, "snapshot": snapshot_path})
    with pytest.raises(exceptions.AlreadyExists):
        pubsub.subscriber.create_snapshot(request={"name": snapshot_path, "subscription": sub})


@pytest.mark.official_differs("it drops a snapshot's labels")
def test_a_snapshot_keeps_its_labels(pubsub: PubSub) -> None:
    sub = pubsub.subscription("requests-sub", pubsub.topic("requests"))
    snapshot_path = pubsub.subscriber.snapshot_path(pubsub.project, "labelled")
    pubsub.subscriber.create_snapshot(request={"name": snapshot_path, "subscription": sub, "labels": {"why": "drill"}})
    assert dict(pubsub.subscriber.get_snapshot(snapshot=snapshot_path).labels) == {"why": "drill"}


@pytest.mark.official_differs("it hands a new subscription every message its topic retained, at once, without a "
                              "seek; on the service a subscription starts from its creation and seeks back")
def test_a_later_subscription_seeks_back_into_its_topics_retained_messages(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests", create=False)
    pubsub.publisher.create_topic(request={"name": topic, "message_retention_duration": {"seconds": 600}})
    started = time.time() - 1
    pubsub.publish(topic, b"m1")  # no subscription yet: only the topic keeps them
    pubsub.publish(topic, b"m2")
    sub = pubsub.subscription("late-sub", topic)
    assert pubsub.pull_within(sub, 0.5) == []  # a new subscription starts from now

    _seek(pubsub, sub, started)
    assert sorted(_pull_and_ack_all(pubsub, sub, 2)) == [b"m1", b"m2"]
    _seek(pubsub, sub, started)  # acked, still retained by the topic
    assert sorted(_pull_and_ack_all(pubsub, sub, 2)) == [b"m1", b"m2"]
