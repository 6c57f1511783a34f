"""The DLQ reclaimer on the emulator: result-less dead letters get `failed`, and stay in the DLQ."""

from __future__ import annotations

import json

import pytest

from runtime.protocol import contract
from runtime.protocol.messages import ErrorKind, JobResult, JobStatus
from runtime.protocol.queues import QueueSpec, with_built_ins
from runtime.pubsub.admin import subscription_path, topic_path
from runtime.pubsub.clients import publisher_client, subscriber_client
from runtime.pubsub.publisher import TopicPublisher
from runtime.scheduler.reclaimer import DlqReclaimer
from runtime.scheduler.singletons import SINGLETON_PERIOD_S
from tests.runtime.scheduler import ON_THE_PACKAGE_PLATFORM
from tests.runtime.scheduler.conftest import Platform
from tests.runtime.scheduler.platform import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60), ON_THE_PACKAGE_PLATFORM]


def test_dead_letters_without_a_result_get_failed_and_stay(platform: Platform) -> None:
    publisher = publisher_client(platform.emulator.address)
    subscriber = subscriber_client(platform.emulator.address)
    store = platform.service.store
    store.put(JobResult(job_id="dlq-done", status=JobStatus.FAILED, attempt=5))
    store.mark_published("dlq-done")
    # The last attempt stored `failed`, then its publish failed: the message dead-lettered unanswered.
    unpublished = JobResult(job_id="dlq-unpublished", status=JobStatus.FAILED, attempt=5)
    store.put(unpublished)
    dlq = topic_path(platform.project, contract.REQUEST_DLQ_TOPIC)
    # What Pub/Sub adds to a message it dead-letters from the request subscription.
    dead_lettered = {contract.DEAD_LETTER_SOURCE_SUBSCRIPTION: contract.REQUEST_SUBSCRIPTION,
                     contract.DEAD_LETTER_SOURCE_PROJECT: platform.project}
    for job_id in ("dlq-orphan", "dlq-done", "dlq-unpublished"):
        publisher.publish(dlq, json.dumps({"job_id": job_id, "type": "noop"}).encode(), job_id=job_id,
                          **dead_lettered).result(10)
    # issue #35: a valid body published straight to the dead-letter topic made the leader store `failed` for
    # the job it names, whose own request was then answered from the store and never ran
    for forged, attributes in (("dlq-forged", {}), ("dlq-forged-elsewhere", {
            **dead_lettered, contract.DEAD_LETTER_SOURCE_SUBSCRIPTION: "some-other-sub"})):
        publisher.publish(dlq, json.dumps({"job_id": forged, "type": "noop"}).encode(), **attributes).result(10)
    try:
        # The service's leader loop runs the reclaimer every SINGLETON_PERIOD_S.
        result = platform.results.wait("dlq-orphan", timeout_s=SINGLETON_PERIOD_S + 20)
        assert result.status is JobStatus.FAILED and result.error.kind is ErrorKind.TRANSIENT
        assert store.get("dlq-orphan") == result
        assert platform.results.wait("dlq-unpublished", timeout_s=SINGLETON_PERIOD_S + 20) == unpublished
        assert store.is_published("dlq-unpublished")
        reclaimer = DlqReclaimer(subscriber, platform.project, store, TopicPublisher(publisher, platform.project))
        assert reclaimer.run() == []  # idempotent: all three are published now; the forged ones get nothing
        assert platform.results.of("dlq-done") == []
        for forged in ("dlq-forged", "dlq-forged-elsewhere"):
            assert platform.results.of(forged) == [] and store.get(forged) is None
        assert platform.results.of("dlq-unpublished") == [unpublished]
        # By full name: other modules' platforms share this emulator under projects of their own.
        stats = platform.emulator.stats().subscription(
            subscription_path(platform.project, contract.REQUEST_DLQ_SUBSCRIPTION))
        assert stats.undelivered + stats.outstanding >= 5  # released, not acked: replay still has them
    finally:
        publisher.stop()
        subscriber.close()


def test_dead_letters_of_the_urgent_and_desk_queues_are_answered(platform: Platform) -> None:
    """issue #45: every request queue dead-letters to the one topic; the reclaimer answers a dead letter from any
    queue the scheduler consumes, not only from the default queue's subscription."""
    publisher = publisher_client(platform.emulator.address)
    subscriber = subscriber_client(platform.emulator.address)
    store = platform.service.store
    reclaimer = DlqReclaimer(subscriber, platform.project, store, TopicPublisher(publisher, platform.project),
                             queues=with_built_ins([QueueSpec("rates-desk")]))
    dlq = topic_path(platform.project, contract.REQUEST_DLQ_TOPIC)
    letters = {"dlq-urgent": contract.URGENT_REQUEST_SUBSCRIPTION, "dlq-rates": "gpu-job-request-rates-desk-sub"}
    try:
        for job_id, source in letters.items():
            publisher.publish(dlq, json.dumps({"job_id": job_id, "type": "noop"}).encode(), job_id=job_id,
                              **{contract.DEAD_LETTER_SOURCE_SUBSCRIPTION: source,
                                 contract.DEAD_LETTER_SOURCE_PROJECT: platform.project}).result(10)
        # The service's own reclaimer reads the same subscription and releases what it holds after each run.
        wait_for(lambda: reclaimer.run() is not None and all(store.get(job_id) for job_id in letters), 30,
                 "both dead letters answered")
        for job_id in letters:
            result = platform.results.wait(job_id, timeout_s=20)
            assert result.status is JobStatus.FAILED and result.error.kind is ErrorKind.TRANSIENT
    finally:
        publisher.stop()
