"""The durable broker (``--data-dir``): what it acknowledged survives a SIGKILL and a restart on the same
data directory, driven by the real google-cloud-pubsub client against ``python -m runtime.local.broker``
processes. Builtin only: Google's emulator keeps everything in memory (docs/emulator.md)."""

from __future__ import annotations

import os
import signal
import warnings
from pathlib import Path

import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1
from google.protobuf import field_mask_pb2, timestamp_pb2

from runtime.local.broker import start_emulator
from runtime.local.broker.journal import DATABASE_FILE
from runtime.local.broker.process import builtin_process, default_clients

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PROJECT = "gpurt-durable"
MESSAGES = 300
ACKED = 100  # of the first pulled batch
NACKED = 20  # delivered once, then nacked: their next delivery is attempt 2
START_TIMEOUT_S = 30.0


def _pull_all(subscriber: pubsub_v1.SubscriberClient, subscription: str, want: int) -> list:
    """Pull until ``want`` messages arrived (each pull waits for a first message) or a pull comes back empty;
    then one immediate pull, which must find nothing more."""
    received: list = []
    while len(received) < want:
        batch = subscriber.pull(request={"subscription": subscription, "max_messages": want - len(received)},
                                timeout=30).received_messages
        if not batch:
            break
        received.extend(batch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # still the one way to ask "anything more now?"
        more = subscriber.pull(request={"subscription": subscription, "max_messages": 10,
                                        "return_immediately": True}, timeout=30).received_messages
    return received + list(more)


def test_a_killed_broker_restarts_with_every_unacked_message_and_its_delivery_attempts(tmp_path: Path) -> None:
    with builtin_process("--data-dir", str(tmp_path)) as (process, address), \
            default_clients(address) as (publisher, subscriber):
        topic, dlq = publisher.topic_path(PROJECT, "requests"), publisher.topic_path(PROJECT, "requests-dlq")
        publisher.create_topic(name=topic)
        publisher.create_topic(name=dlq)
        sub = subscriber.subscription_path(PROJECT, "requests-sub")
        subscriber.create_subscription(request={
            "name": sub, "topic": topic, "ack_deadline_seconds": 600, "labels": {"tier": "gpu"},
            "filter": "attributes:job_id",
            "dead_letter_policy": {"dead_letter_topic": dlq, "max_delivery_attempts": 5}})
        futures = [publisher.publish(topic, f"m{i}".encode(), job_id=f"j{i}") for i in range(MESSAGES)]
        published = {future.result(timeout=30) for future in futures}
        first = subscriber.pull(request={"subscription": sub, "max_messages": ACKED + NACKED},
                                timeout=30).received_messages
        assert len(first) == ACKED + NACKED
        subscriber.acknowledge(subscription=sub, ack_ids=[m.ack_id for m in first[:ACKED]])
        nacked = {m.message.message_id for m in first[ACKED:]}
        subscriber.modify_ack_deadline(subscription=sub, ack_ids=[m.ack_id for m in first[ACKED:]],
                                       ack_deadline_seconds=0)
        acked = {m.message.message_id for m in first[:ACKED]}
        port = int(address.rsplit(":", 1)[1])
        os.kill(process.pid, signal.SIGKILL)  # no chance to flush or close anything
        process.wait(timeout=START_TIMEOUT_S)

    with builtin_process("--data-dir", str(tmp_path), port=port) as (_, address), \
            default_clients(address) as (publisher, subscriber):
        kept = subscriber.get_subscription(subscription=sub)
        assert (kept.ack_deadline_seconds, dict(kept.labels)) == (600, {"tier": "gpu"})
        assert kept.filter == "attributes:job_id"
        assert (kept.dead_letter_policy.dead_letter_topic, kept.dead_letter_policy.max_delivery_attempts) == (dlq, 5)
        again = _pull_all(subscriber, sub, MESSAGES - ACKED)
        redelivered = {m.message.message_id: m for m in again}
        assert len(again) == MESSAGES - ACKED  # nothing lost, nothing twice
        assert set(redelivered) == published - acked  # acked messages are not redelivered
        assert {m.delivery_attempt for i, m in redelivered.items() if i in nacked} == {2}
        assert {m.delivery_attempt for i, m in redelivered.items() if i not in nacked} == {1}
        assert {m.message.attributes["job_id"] for m in again} == {
            f"j{int(m.message.data[1:])}" for m in again}  # data and attributes intact
        # Ids go on from where the killed broker stopped: a new message never reuses an old id.
        assert publisher.publish(topic, b"after", job_id="after").result(timeout=30) not in published


def test_topics_subscriptions_snapshots_and_retained_acks_survive_a_restart(tmp_path: Path) -> None:
    with start_emulator(data_dir=tmp_path) as first, default_clients(first.address) as (publisher, subscriber):
        topic = publisher.topic_path(PROJECT, "results")
        publisher.create_topic(request={"name": topic, "labels": {"team": "risk"}})
        sub = subscriber.subscription_path(PROJECT, "results-sub")
        subscriber.create_subscription(request={"name": sub, "topic": topic, "retain_acked_messages": True})
        gone = subscriber.subscription_path(PROJECT, "gone-sub")
        subscriber.create_subscription(request={"name": gone, "topic": topic})
        subscriber.delete_subscription(subscription=gone)
        publisher.publish(topic, b"r1").result(timeout=30)
        [r1] = _pull_all(subscriber, sub, 1)
        subscriber.acknowledge(subscription=sub, ack_ids=[r1.ack_id])
        snapshot = subscriber.snapshot_path(PROJECT, "before")
        subscriber.create_snapshot(request={"name": snapshot, "subscription": sub, "labels": {"why": "drill"}})
        publisher.publish(topic, b"r2").result(timeout=30)  # after the snapshot: it holds this one too
        subscriber.update_subscription(request={
            "subscription": {"name": sub, "ack_deadline_seconds": 30},
            "update_mask": field_mask_pb2.FieldMask(paths=["ack_deadline_seconds"])})
        stats = first.stats().subscription("results-sub")

    assert (tmp_path / DATABASE_FILE).is_file()
    with start_emulator(data_dir=tmp_path) as second, default_clients(second.address) as (publisher, subscriber):
        assert second.stats().subscription("results-sub") == stats  # one unacked, one acked and retained
        assert second.stats().published == {topic: 2}
        assert dict(publisher.get_topic(topic=topic).labels) == {"team": "risk"}
        assert [s.name for s in subscriber.list_subscriptions(request={"project": f"projects/{PROJECT}"})] == [sub]
        assert subscriber.get_subscription(subscription=sub).ack_deadline_seconds == 30
        assert dict(subscriber.get_snapshot(snapshot=snapshot).labels) == {"why": "drill"}
        [r2] = _pull_all(subscriber, sub, 1)
        assert r2.message.data == b"r2"
        subscriber.acknowledge(subscription=sub, ack_ids=[r2.ack_id])
        subscriber.seek(request={"subscription": sub, "snapshot": snapshot})
        assert [m.message.data for m in _pull_all(subscriber, sub, 1)] == [b"r2"]  # r1 was acked before it
        with pytest.raises(exceptions.NotFound):
            subscriber.get_subscription(subscription=gone)


def test_an_unreadable_data_file_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / DATABASE_FILE).write_bytes(b"not a database, " * 100)
    with pytest.raises(OSError, match=DATABASE_FILE):
        start_emulator(data_dir=tmp_path)


def test_a_topics_retained_messages_survive_a_restart(tmp_path: Path) -> None:
    with start_emulator(data_dir=tmp_path) as first, default_clients(first.address) as (publisher, _):
        topic = publisher.topic_path(PROJECT, "requests")
        publisher.create_topic(request={"name": topic, "message_retention_duration": {"seconds": 600}})
        publisher.publish(topic, b"kept").result(timeout=30)  # no subscription: only the topic keeps it

    with start_emulator(data_dir=tmp_path) as second, default_clients(second.address) as (_, subscriber):
        sub = subscriber.subscription_path(PROJECT, "late-sub")
        subscriber.create_subscription(request={"name": sub, "topic": topic})
        target = timestamp_pb2.Timestamp()
        target.FromSeconds(0)
        subscriber.seek(request={"subscription": sub, "time": target})
        assert [m.message.data for m in _pull_all(subscriber, sub, 1)] == [b"kept"]


def test_a_change_that_cannot_be_written_is_answered_unavailable_naming_the_file(tmp_path: Path) -> None:
    import grpc

    from runtime.local.broker.clock import Clock
    from runtime.local.broker.errors import PubSubError
    from runtime.local.broker.journal import Journal
    from runtime.local.broker.proto import Topic
    from runtime.local.broker.state import Broker

    journal = Journal(tmp_path / DATABASE_FILE)
    broker = Broker(Clock(), journal)
    try:
        journal._conn.close()  # the file can no longer be written, as on a full or vanished disk
        broker.create_topic(Topic(name=f"projects/{PROJECT}/topics/requests"))
        with pytest.raises(PubSubError) as refused:
            broker.flush()
        assert refused.value.code is grpc.StatusCode.UNAVAILABLE
        assert str(tmp_path / DATABASE_FILE) in refused.value.message
    finally:
        broker.close()


def test_a_second_broker_on_the_same_data_folder_is_refused(tmp_path: Path) -> None:
    with start_emulator(data_dir=tmp_path), pytest.raises(OSError, match="another broker is using"):
        start_emulator(data_dir=tmp_path)
