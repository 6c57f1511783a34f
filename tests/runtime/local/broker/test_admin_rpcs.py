"""Topic and subscription management through the real client, including the service's error codes."""

from __future__ import annotations

import pytest
from google.api_core import exceptions
from google.cloud.pubsub_v1.publisher._batch.thread import _SERVER_PUBLISH_MAX_BYTES
from google.protobuf import field_mask_pb2

from tests.runtime.local.broker import ON_THE_OFFICIAL_EMULATOR
from tests.runtime.local.broker.conftest import PubSub

pytestmark = [pytest.mark.integration, ON_THE_OFFICIAL_EMULATOR]

# Past the 64 MiB that gRPC's receive cap used to stop a request at, with RESOURCE_EXHAUSTED (bytes of data).
OVER_GRPC_CAP_BYTES = 68_000_000


def test_topic_lifecycle(pubsub: PubSub) -> None:
    topic = pubsub.topic("orders", create=False)
    pubsub.publisher.create_topic(request={"name": topic, "labels": {"team": "risk"}})

    assert pubsub.publisher.get_topic(topic=topic).labels == {"team": "risk"}
    pubsub.topic("audit")
    listed = [t.name for t in pubsub.publisher.list_topics(request={"project": f"projects/{pubsub.project}"})]
    assert listed == [pubsub.publisher.topic_path(pubsub.project, "audit"), topic]

    pubsub.publisher.delete_topic(topic=topic)
    with pytest.raises(exceptions.NotFound):
        pubsub.publisher.get_topic(topic=topic)


def test_topic_errors(pubsub: PubSub) -> None:
    topic = pubsub.topic("orders")
    with pytest.raises(exceptions.AlreadyExists):
        pubsub.publisher.create_topic(name=topic)
    with pytest.raises(exceptions.NotFound):
        pubsub.publisher.delete_topic(topic=pubsub.topic("missing", create=False))
    with pytest.raises(exceptions.InvalidArgument, match="Invalid \\[topics\\] name"):
        pubsub.publisher.create_topic(name=f"projects/{pubsub.project}/topics/9-starts-with-a-digit")
    with pytest.raises(exceptions.NotFound):
        pubsub.publisher.publish(pubsub.topic("never-created", create=False), b"x").result(timeout=10)


def test_topic_listing_pages(pubsub: PubSub) -> None:
    created = sorted(pubsub.topic(f"topic-{i:02d}") for i in range(7))
    pages = pubsub.publisher.list_topics(request={"project": f"projects/{pubsub.project}", "page_size": 3}).pages
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
        "subscription": {"name": sub, "ack_deadline_seconds": 30},
        "update_mask": field_mask_pb2.FieldMask(paths=["ack_deadline_seconds"]),
    })
    assert updated.ack_deadline_seconds == 30
    assert pubsub.subscriber.get_subscription(subscription=sub).ack_deadline_seconds == 30

    listed = pubsub.subscriber.list_subscriptions(request={"project": f"projects/{pubsub.project}"})
    assert [s.name for s in listed] == [sub]
    assert list(pubsub.publisher.list_topic_subscriptions(request={"topic": topic})) == [sub]

    pubsub.subscriber.delete_subscription(subscription=sub)
    with pytest.raises(exceptions.NotFound):
        pubsub.subscriber.get_subscription(subscription=sub)


@pytest.mark.official_differs("it refuses `labels` in an UpdateSubscription mask; the service updates them")
def test_update_subscription_labels(pubsub: PubSub) -> None:
    sub = pubsub.subscription("requests-sub", pubsub.topic("requests"))
    updated = pubsub.subscriber.update_subscription(request={
        "subscription": {"name": sub, "labels": {"tier": "gpu"}},
        "update_mask": field_mask_pb2.FieldMask(paths=["labels"]),
    })
    assert dict(updated.labels) == {"tier": "gpu"}
    assert dict(pubsub.subscriber.get_subscription(subscription=sub).labels) == {"tier": "gpu"}


def test_subscription_errors(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    pubsub.subscription("requests-sub", topic)
    with pytest.raises(exceptions.AlreadyExists):
        pubsub.subscription("requests-sub", topic)
    with pytest.raises(exceptions.NotFound):
        pubsub.subscription("orphan-sub", pubsub.topic("no-such-topic", create=False))
    with pytest.raises(exceptions.InvalidArgument):
        pubsub.subscription("deadline-601", topic, ack_deadline_seconds=601)
    dlq = pubsub.topic("requests-dlq")
    # INVALID_ARGUMENT here, OUT_OF_RANGE on the official emulator: both are 400s no client tells apart.
    with pytest.raises(exceptions.BadRequest, match="max_delivery_attempts"):
        pubsub.subscription("few-attempts", topic,
                            dead_letter_policy={"dead_letter_topic": dlq, "max_delivery_attempts": 4})
    with pytest.raises(exceptions.InvalidArgument, match="update_mask"):
        pubsub.subscriber.update_subscription(request={
            "subscription": {"name": pubsub.subscription_path("requests-sub"), "topic": dlq},
            "update_mask": field_mask_pb2.FieldMask(paths=["topic"]),
        })


@pytest.mark.official_differs("its errors say only 'Topic not found' / 'Subscription already exists'; the service "
                              "names the resource: 'Resource not found (resource=orders).'")
def test_errors_name_the_resource_like_the_service(pubsub: PubSub) -> None:
    topic = pubsub.topic("orders")
    with pytest.raises(exceptions.AlreadyExists,
                       match=r"^409 Resource already exists in the project \(resource=orders\)\.$"):
        pubsub.publisher.create_topic(name=topic)
    with pytest.raises(exceptions.NotFound, match=r"^404 Resource not found \(resource=missing\)\.$"):
        pubsub.publisher.get_topic(topic=pubsub.topic("missing", create=False))
    with pytest.raises(exceptions.NotFound, match=r"resource=no-such-topic"):
        pubsub.subscription("orphan-sub", pubsub.topic("no-such-topic", create=False))
    pubsub.subscription("requests-sub", topic)
    with pytest.raises(exceptions.AlreadyExists, match="resource=requests-sub"):
        pubsub.subscription("requests-sub", topic)


@pytest.mark.official_differs("it accepts and keeps an ack deadline below 10 s; the service's minimum is 10 s")
def test_ack_deadline_below_ten_seconds_is_refused(pubsub: PubSub) -> None:
    with pytest.raises(exceptions.InvalidArgument, match="ack_deadline_seconds"):
        pubsub.subscription("deadline-5", pubsub.topic("requests"), ack_deadline_seconds=5)


def test_deleting_a_topic_detaches_its_subscriptions(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic)
    pubsub.publisher.delete_topic(topic=topic)
    assert pubsub.subscriber.get_subscription(subscription=sub).topic == "_deleted-topic_"


def _publish_raw(pubsub: PubSub, topic: str, messages: list[dict]) -> None:
    """One Publish request as given, through the library's generated client on the same channel: the
    high-level client splits batches and refuses oversized messages itself, before the server could."""
    from google.pubsub_v1.services.publisher import PublisherClient as GeneratedPublisherClient

    generated = GeneratedPublisherClient(transport=pubsub.publisher.transport)
    generated.publish(topic=topic, messages=messages, retry=None, timeout=30)


def _data_for_request_of(topic: str, size: int) -> bytes:
    """Data that makes a one-message Publish request to ``topic`` exactly ``size`` bytes on the wire."""
    from google.pubsub_v1.types import PublishRequest

    data_len = size - 20  # field tags and length prefixes take a few bytes; settle them exactly below
    while True:
        wire = PublishRequest.pb(PublishRequest(topic=topic, messages=[{"data": b"x" * data_len}])).ByteSize()
        if wire == size:
            return b"x" * data_len
        data_len += size - wire


@pytest.mark.official_differs("it enforces none of the service's size limits: a 10.5 MB message and oversized "
                              "attributes and ordering keys are accepted, a 15 MB request resets the stream")
def test_publish_limits_are_the_services(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    too_big = [
        [{"data": b"x", "attributes": {f"k{i:03d}": "v" for i in range(101)}}],
        [{"data": b"x", "attributes": {"k" * 257: "v"}}],
        [{"data": b"x", "attributes": {"k": "v" * 1025}}],
        [{"data": b"x", "ordering_key": "o" * 1025}],
        [{"data": b"x" * 15_000_000}],
        [{"data": b"x" * 25_000_000}],  # above gRPC's default caps, still the service's own answer
        [{"data": b"x" * 6_000_000}, {"data": b"y" * 6_000_000}],  # each fits, the request does not
        [{"data": _data_for_request_of(topic, _SERVER_PUBLISH_MAX_BYTES + 1)}],
    ]
    for messages in too_big:
        with pytest.raises(exceptions.InvalidArgument):
            _publish_raw(pubsub, topic, messages)
    # Up to the limits is fine: a request of exactly 10,000,000 bytes, the client library's own figure.
    _publish_raw(pubsub, topic, [{"data": _data_for_request_of(topic, _SERVER_PUBLISH_MAX_BYTES)}])
    _publish_raw(pubsub, topic, [{"data": b"x", "attributes": {f"k{i:03d}": "v" * 1024 for i in range(100)},
                                  "ordering_key": "o" * 1024}, {"data": b"y", "attributes": {"k" * 256: "v"}}])


def test_a_publish_over_grpcs_usual_cap_is_refused_at_once_not_retried(builtin_pubsub: PubSub) -> None:
    # issue #35: over 64 MB gRPC's own cap answered RESOURCE_EXHAUSTED, which the library retries until its
    # deadline (120 s by default); the service's INVALID_ARGUMENT is not retried
    from google.pubsub_v1.services.publisher import PublisherClient as GeneratedPublisherClient

    topic = builtin_pubsub.topic("requests")
    generated = GeneratedPublisherClient(transport=builtin_pubsub.publisher.transport)
    with pytest.raises(exceptions.InvalidArgument, match="exceeds the limit: 10000000 bytes"):
        # the library's default retry, as a user's call has it; the timeout bounds the old behaviour's retries
        generated.publish(topic=topic, messages=[{"data": b"x" * OVER_GRPC_CAP_BYTES}], timeout=60)
    assert builtin_pubsub.emulator is not None and builtin_pubsub.emulator.stats().published[topic] == 0


def test_publish_refuses_too_many_or_empty_messages(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    for messages in ([{"data": b"x"}] * 1001, [{}]):
        with pytest.raises(exceptions.InvalidArgument):
            _publish_raw(pubsub, topic, messages)


def test_settings_the_builtin_cannot_honour_are_refused(builtin_pubsub: PubSub) -> None:
    pubsub = builtin_pubsub
    topic = pubsub.topic("requests")
    refused_topics = [
        {"schema_settings": {"schema": f"projects/{pubsub.project}/schemas/job", "encoding": "JSON"}},
        {"ingestion_data_source_settings": {"cloud_storage": {"bucket": "landing"}}},
        {"message_transforms": [{"javascript_udf": {"function_name": "f", "code": "function f(m){return m}"}}]},
    ]
    for i, settings in enumerate(refused_topics):
        with pytest.raises(exceptions.MethodNotImplemented):
            pubsub.publisher.create_topic(request={"name": pubsub.publisher.topic_path(pubsub.project, f"t-{i}"),
                                                   **settings})
    refused_subscriptions = [
        {"message_transforms": [{"javascript_udf": {"function_name": "f", "code": "function f(m){return m}"}}]},
        {"bigtable_config": {"table": "projects/p/instances/i/tables/t"}},
    ]
    for i, settings in enumerate(refused_subscriptions):
        with pytest.raises(exceptions.MethodNotImplemented):
            pubsub.subscription(f"s-{i}", topic, **settings)
    assert [t.name for t in pubsub.publisher.list_topics(request={"project": f"projects/{pubsub.project}"})] == [topic]
    assert list(pubsub.publisher.list_topic_subscriptions(request={"topic": topic})) == []


@pytest.mark.official_differs("it does not implement DetachSubscription (UNIMPLEMENTED)")
def test_a_detached_subscription_gets_nothing_and_refuses_pulls(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic)
    pubsub.publish(topic, b"backlog")
    pubsub.publisher.detach_subscription(request={"subscription": sub})
    assert pubsub.subscriber.get_subscription(subscription=sub).detached
    pubsub.publish(topic, b"after")
    with pytest.raises(exceptions.FailedPrecondition):
        pubsub.pull_within(sub, 1)
    future = pubsub.subscriber.subscribe(sub, lambda message: message.ack())
    with pytest.raises(exceptions.FailedPrecondition):
        future.result(timeout=10)


def test_updates_name_the_unsupported_feature_and_store_what_has_no_local_effect(builtin_pubsub: PubSub) -> None:
    pubsub = builtin_pubsub
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic)

    def update_subscription(**fields: object) -> object:
        return pubsub.subscriber.update_subscription(request={
            "subscription": {"name": sub, **fields}, "update_mask": field_mask_pb2.FieldMask(paths=list(fields))})

    with pytest.raises(exceptions.MethodNotImplemented, match="exactly-once delivery"):
        update_subscription(enable_exactly_once_delivery=True)
    assert not update_subscription(enable_exactly_once_delivery=False).enable_exactly_once_delivery  # what it does
    with pytest.raises(exceptions.MethodNotImplemented, match="BigQuery subscriptions"):
        update_subscription(bigquery_config={"table": "p.d.t"})

    def update_topic(**fields: object) -> object:
        return pubsub.publisher.update_topic(request={
            "topic": {"name": topic, **fields}, "update_mask": field_mask_pb2.FieldMask(paths=list(fields))})

    kms = f"projects/{pubsub.project}/locations/europe-west1/keyRings/k/cryptoKeys/pubsub"
    updated = update_topic(kms_key_name=kms, message_storage_policy={"allowed_persistence_regions": ["europe-west1"]})
    assert (updated.kms_key_name, list(updated.message_storage_policy.allowed_persistence_regions)) == (
        kms, ["europe-west1"])
    assert pubsub.publisher.get_topic(topic=topic).kms_key_name == kms
    with pytest.raises(exceptions.MethodNotImplemented, match="schemas"):
        update_topic(schema_settings={"schema": f"projects/{pubsub.project}/schemas/job", "encoding": "JSON"})
    assert not pubsub.publisher.get_topic(topic=topic).schema_settings.schema  # nothing half-applied


def test_the_schema_and_iam_services_answer_which_feature_is_not_supported(builtin_pubsub: PubSub) -> None:
    from google.cloud.pubsub_v1 import SchemaServiceClient

    pubsub = builtin_pubsub
    topic = pubsub.topic("requests")
    schemas = SchemaServiceClient()
    try:
        with pytest.raises(exceptions.MethodNotImplemented, match="does not support schemas"):
            schemas.create_schema(request={"parent": f"projects/{pubsub.project}", "schema_id": "job",
                                           "schema": {"type_": "AVRO", "definition": "{}"}})
        with pytest.raises(exceptions.MethodNotImplemented, match="does not support schemas"):
            schemas.list_schemas(request={"parent": f"projects/{pubsub.project}"})
    finally:
        schemas.transport.close()
    with pytest.raises(exceptions.MethodNotImplemented, match="does not support IAM policies"):
        pubsub.publisher.get_iam_policy(request={"resource": topic})
    with pytest.raises(exceptions.MethodNotImplemented, match="does not support IAM policies"):
        pubsub.subscriber.test_iam_permissions(request={"resource": pubsub.subscription("requests-sub", topic),
                                                        "permissions": ["pubsub.subscriptions.consume"]})
