"""Topic and subscription management through the real client, including the service's error codes."""

from __future__ import annotations

import pytest
from google.api_core import exceptions
from google.protobuf import field_mask_pb2

from tests.runtime.emulator.conftest import PROJECT, PubSub

pytestmark = pytest.mark.integration


def test_topic_lifecycle(pubsub: PubSub) -> None:
    topic = pubsub.topic("orders", create=False)
    pubsub.publisher.create_topic(request={"name": topic, "labels": {"team": "risk"}})

    assert pubsub.publisher.get_topic(topic=topic).labels == {"team": "risk"}
    pubsub.topic("audit")
    listed = [t.name for t in pubsub.publisher.list_topics(request={"project": f"projects/{PROJECT}"})]
    assert listed == [pubsub.publisher.topic_path(PROJECT, "audit"), topic]

    pubsub.publisher.delete_topic(topic=topic)
    with pytest.raises(exceptions.NotFound, match="resource=orders"):
        pubsub.publisher.get_topic(topic=topic)


def test_topic_errors(pubsub: PubSub) -> None:
    topic = pubsub.topic("orders")
    with pytest.raises(exceptions.AlreadyExists, match="resource=orders"):
        pubsub.publisher.create_topic(name=topic)
    with pytest.raises(exceptions.NotFound):
        pubsub.publisher.delete_topic(topic=pubsub.topic("missing", create=False))
    with pytest.raises(exceptions.InvalidArgument, match="Invalid \\[topics\\] name"):
        pubsub.publisher.create_topic(name=f"projects/{PROJECT}/topics/9-starts-with-a-digit")
    with pytest.raises(exceptions.NotFound):
        pubsub.publisher.publish(pubsub.topic("never-created", create=False), b"x").result(timeout=10)


def test_topic_listing_pages(pubsub: PubSub) -> None:
    created = sorted(pubsub.topic(f"topic-{i:02d}") for i in range(7))
    pages = pubsub.publisher.list_topics(request={"project": f"projects/{PROJECT}", "page_size": 3}).pages
    sizes_and_names = [(len(page.topics), [t.name for t in page.topics]) for page in pages]
    assert [size for size, _ in sizes_and_names] == [3, 3, 1]
    assert [name for _, names in sizes_and_names for name in names] == created


def test_subscription_lifecycle(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic, ack_deadline_seconds=600)

    got = pubsub.subscriber.get_subscription(subscription=sub)
    assert (got.topic, got.ack_deadline_seconds) == (topic, 600)
    assert got.message_retention_duration.days == 7  # the service's default

    updated = pubsub.subscriber.update_subscription(request={
        "subscription": {"name": sub, "ack_deadline_seconds": 30, "labels": {"tier": "gpu"}},
        "update_mask": field_mask_pb2.FieldMask(paths=["ack_deadline_seconds", "labels"]),
    })
    assert (updated.ack_deadline_seconds, dict(updated.labels)) == (30, {"tier": "gpu"})
    assert pubsub.subscriber.get_subscription(subscription=sub).ack_deadline_seconds == 30

    listed = pubsub.subscriber.list_subscriptions(request={"project": f"projects/{PROJECT}"})
    assert [s.name for s in listed] == [sub]
    assert list(pubsub.publisher.list_topic_subscriptions(request={"topic": topic})) == [sub]

    pubsub.subscriber.delete_subscription(subscription=sub)
    with pytest.raises(exceptions.NotFound, match="resource=requests-sub"):
        pubsub.subscriber.get_subscription(subscription=sub)


def test_subscription_errors(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    pubsub.subscription("requests-sub", topic)
    with pytest.raises(exceptions.AlreadyExists, match="resource=requests-sub"):
        pubsub.subscription("requests-sub", topic)
    with pytest.raises(exceptions.NotFound, match="resource=no-such-topic"):
        pubsub.subscription("orphan-sub", pubsub.topic("no-such-topic", create=False))
    for deadline in (5, 601):
        with pytest.raises(exceptions.InvalidArgument, match="ack_deadline_seconds"):
            pubsub.subscription(f"deadline-{deadline}", topic, ack_deadline_seconds=deadline)
    dlq = pubsub.topic("requests-dlq")
    with pytest.raises(exceptions.InvalidArgument, match="max_delivery_attempts"):
        pubsub.subscription("few-attempts", topic,
                            dead_letter_policy={"dead_letter_topic": dlq, "max_delivery_attempts": 4})
    with pytest.raises(exceptions.InvalidArgument, match="update_mask"):
        pubsub.subscriber.update_subscription(request={
            "subscription": {"name": pubsub.subscriber.subscription_path(PROJECT, "requests-sub"), "topic": dlq},
            "update_mask": field_mask_pb2.FieldMask(paths=["topic"]),
        })


def test_deleting_a_topic_detaches_its_subscriptions(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic)
    pubsub.publisher.delete_topic(topic=topic)
    assert pubsub.subscriber.get_subscription(subscription=sub).topic == "_deleted-topic_"
