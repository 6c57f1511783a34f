"""DLQ tools against the project's emulator, through the real google-cloud-pubsub client."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from runtime.access.transport import PubSubClients, make_clients
from runtime.protocol.contract import (
    REPLAY_ATTRIBUTE,
    REQUEST_DLQ_TOPIC,
    REQUEST_SUBSCRIPTION,
    REQUEST_TOPIC,
)
from runtime.protocol.queues import QueueSpec, topology, with_built_ins
from runtime.pubsub.admin import ensure_topology
from validation.dlq import DeadLetterQueue
from validation.dlq.tools import REPLAYED_FROM_ATTRIBUTE

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]
PROJECT = "gpurt-dlq-test"


@pytest.fixture
def clients() -> Iterator[PubSubClients]:
    from runtime.local.broker import start_emulator

    emulator = start_emulator("127.0.0.1", 0)
    clients = make_clients(PROJECT, emulator.address)
    ensure_topology(PROJECT, clients.publisher, clients.subscriber)
    try:
        yield clients
    finally:
        clients.close()
        emulator.stop()


def dead_letter(clients: PubSubClients, job_id: str, data: bytes | None = None) -> str:
    """Put a message on the DLQ topic the way Pub/Sub forwards one (original body and attributes)."""
    body = data if data is not None else json.dumps({"job_id": job_id, "type": "noop"}).encode()
    future = clients.publisher.publish(clients.topic(REQUEST_DLQ_TOPIC), body, job_id=job_id, type="noop",
                                       CloudPubSubDeadLetterSourceDeliveryCount="5")
    return future.result(timeout=10)


def pull_requests(clients: PubSubClients, expected: int) -> list:
    received: list = []
    for _ in range(20):  # bounded: each pull waits at most a few seconds
        response = clients.subscriber.pull(request={"subscription": clients.subscription(REQUEST_SUBSCRIPTION),
                                                    "max_messages": 10}, timeout=5)
        received.extend(response.received_messages)
        if len(received) >= expected:
            break
    return received


def test_listing_twice_shows_the_same_letters_and_consumes_none(clients: PubSubClients) -> None:
    ids = {dead_letter(clients, f"job-{i}") for i in range(3)}
    queue = DeadLetterQueue(clients)

    first, second = queue.list(), queue.list()

    assert {letter.message_id for letter in first} == ids == {letter.message_id for letter in second}
    assert {letter.job_id for letter in first} == {"job-0", "job-1", "job-2"}
    assert len(queue.list(limit=2)) == 2


def test_inspect_by_job_id_or_message_id(clients: PubSubClients) -> None:
    message_id = dead_letter(clients, "needle")
    dead_letter(clients, "hay")
    queue = DeadLetterQueue(clients)

    by_job = queue.inspect("needle")

    assert by_job is not None and by_job.message_id == message_id
    assert json.loads(by_job.data) == {"job_id": "needle", "type": "noop"}
    assert queue.inspect(message_id) == by_job
    assert queue.inspect("absent") is None


def test_replay_sample_republishes_with_markers_and_keeps_the_rest(clients: PubSubClients) -> None:
    for i in range(3):
        dead_letter(clients, f"job-{i}")
    queue = DeadLetterQueue(clients)

    report = queue.replay(sample=1)

    assert len(report.replayed) == 1 and report.failed == {}
    (dlq_id, _), = report.replayed.items()
    (received,) = pull_requests(clients, 1)
    attributes = dict(received.message.attributes)
    assert attributes[REPLAYED_FROM_ATTRIBUTE] == dlq_id
    assert attributes[REPLAY_ATTRIBUTE] == "1"
    assert not any(key.startswith("CloudPubSubDeadLetter") for key in attributes)
    assert json.loads(received.message.data)["job_id"] == attributes["job_id"]
    assert len(queue.list()) == 2  # the replayed letter was acked, the others stay


def test_replay_all_preserves_non_utf8_bodies(clients: PubSubClients) -> None:
    dead_letter(clients, "a")
    dead_letter(clients, "binary", data=b"\xff\xfe not json")

    report = DeadLetterQueue(clients).replay()

    assert len(report.replayed) == 2
    bodies = {bytes(r.message.data) for r in pull_requests(clients, 2)}
    assert b"\xff\xfe not json" in bodies
    assert DeadLetterQueue(clients).list() == []


def test_a_failed_publish_leaves_the_letter_on_the_dlq(clients: PubSubClients) -> None:
    message_id = dead_letter(clients, "stuck")
    clients.publisher.delete_topic(request={"topic": clients.topic(REQUEST_TOPIC)})

    report = DeadLetterQueue(clients).replay()

    assert report.replayed == {} and message_id in report.failed
    assert [letter.message_id for letter in DeadLetterQueue(clients).list()] == [message_id]


def test_a_desks_dead_letter_is_replayed_to_that_desks_queue(clients: PubSubClients) -> None:
    """issue #45: the queue is who sent the job, so a replay puts it back on the queue it was dead-lettered from
    (Pub/Sub's source-subscription attribute), never on the default queue."""
    desks = with_built_ins([QueueSpec("rates-desk")])
    ensure_topology(PROJECT, clients.publisher, clients.subscriber, *topology(desks))
    body = json.dumps({"job_id": "rates-1", "type": "noop"}).encode()
    clients.publisher.publish(clients.topic(REQUEST_DLQ_TOPIC), body, job_id="rates-1", type="noop",
                              CloudPubSubDeadLetterSourceSubscription="gpu-job-request-rates-desk-sub",
                              CloudPubSubDeadLetterSourceSubscriptionProject=PROJECT).result(timeout=10)

    report = DeadLetterQueue(clients).replay()

    assert len(report.replayed) == 1 and not report.failed
    response = clients.subscriber.pull(request={"subscription": clients.subscription("gpu-job-request-rates-desk-sub"),
                                                "max_messages": 10}, timeout=5)
    assert [json.loads(r.message.data)["job_id"] for r in response.received_messages] == ["rates-1"]
    assert pull_requests(clients, 0) == []  # nothing went to the default queue


def test_a_dead_letter_from_no_request_queue_stays_on_the_dlq(clients: PubSubClients) -> None:
    message_id = clients.publisher.publish(
        clients.topic(REQUEST_DLQ_TOPIC), b"{}", CloudPubSubDeadLetterSourceSubscription="gpu-job-result-sub",
    ).result(timeout=10)

    report = DeadLetterQueue(clients).replay()

    assert report.replayed == {}
    assert "'gpu-job-result-sub' is not a request queue's subscription" in report.failed[message_id]
    assert [letter.message_id for letter in DeadLetterQueue(clients).list()] == [message_id]
