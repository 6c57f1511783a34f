"""The probe round trip against the real emulator, with a minimal stand-in consumer answering requests."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator

import pytest

from runtime.protocol import contract
from runtime.protocol.messages import JobResult, JobStatus
from validation.checks.probe import PROBE_SUBSCRIPTION_PREFIX, probe_round_trip
from validation.report import Status
from validation.runner import run_check

pytestmark = pytest.mark.timeout(60)


def _answer(pubsub, status: JobStatus, stop: threading.Event,
            subscription: str = contract.PROBE_SUBSCRIPTION) -> None:
    """Consume requests on ``subscription`` (the probe's, by default) and publish a result for each, as the
    scheduler would."""
    while not stop.is_set():
        for message in pubsub.pull(subscription, 10, timeout_s=0.5):
            request = json.loads(message.data)
            result = JobResult(job_id=request["job_id"], status=status)
            pubsub.publish(contract.RESULT_TOPIC, result.model_dump_json().encode(), result.attributes())
            pubsub.acknowledge(subscription, [message.ack_id])


@pytest.fixture
def responder(pubsub, request) -> Iterator[None]:
    stop = threading.Event()
    thread = threading.Thread(target=_answer, args=(pubsub, request.param, stop), daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(timeout=5)


def _temporary_subscriptions(pubsub) -> list[str]:
    subs = pubsub._subscriber.list_subscriptions(request={"project": f"projects/{pubsub.project}"})
    return [s.name for s in subs if PROBE_SUBSCRIPTION_PREFIX in s.name]


@pytest.mark.parametrize("responder", [JobStatus.SUCCEEDED], indirect=True)
def test_probe_passes_when_a_consumer_answers_and_cleans_up(pubsub, responder) -> None:
    result = run_check(probe_round_trip(pubsub))

    assert result.status is Status.PASS, result
    job_id = rf"{contract.PROBE_MESSAGE['job_id']}-\d{{8}}T\d{{6}}Z-[0-9a-f]{{6}}"
    assert re.match(rf"{job_id} succeeded in ", result.evidence)
    assert _temporary_subscriptions(pubsub) == []


@pytest.mark.parametrize("responder", [JobStatus.FAILED], indirect=True)
def test_probe_fails_on_a_failed_result(pubsub, responder) -> None:
    result = run_check(probe_round_trip(pubsub))

    assert result.status is Status.FAIL
    assert "came back failed" in result.evidence


def test_probe_fails_within_its_timeout_when_nobody_consumes(pubsub) -> None:
    result = run_check(probe_round_trip(pubsub, timeout_s=1.5))

    assert result.status is Status.FAIL
    assert re.fullmatch(rf"no result for {contract.PROBE_MESSAGE['job_id']}-\S+ on {contract.RESULT_TOPIC} within 2s",
                        result.evidence)
    assert "gpurt maintenance status" in result.fix
    assert result.duration_s < 10
    assert _temporary_subscriptions(pubsub) == []


def test_each_probe_carries_the_contract_message_with_a_fresh_job_id() -> None:
    from validation.checks.probe import probe_message

    first, second = probe_message(), probe_message()

    assert first["job_id"] != second["job_id"]
    assert {k: v for k, v in first.items() if k != "job_id"} == {
        k: v for k, v in contract.PROBE_MESSAGE.items() if k != "job_id"}


def test_the_probe_reaches_its_own_subscription_alone(pubsub) -> None:
    """issues #42, #45: answered from the probe subscription alone (the scheduler's probe stream, which no backlog
    holds), the probe passes, and no queue's subscription gets a copy of it to answer a second time; an ordinary
    urgent request never reaches the probe subscription, as Pub/Sub applies the subscriptions' filters (the
    emulator does too: docs/emulator.md, "filters")."""
    pubsub.publish(contract.URGENT_REQUEST_TOPIC, json.dumps({"job_id": "ordinary", "type": "noop"}).encode(),
                   {"job_id": "ordinary", "type": "noop"})
    stop = threading.Event()
    thread = threading.Thread(target=_answer, args=(pubsub, JobStatus.SUCCEEDED, stop, contract.PROBE_SUBSCRIPTION),
                              daemon=True)
    thread.start()
    try:
        result = run_check(probe_round_trip(pubsub))
    finally:
        stop.set()
        thread.join(timeout=5)

    assert result.status is Status.PASS, result
    assert pubsub.pull(contract.PROBE_SUBSCRIPTION, 10, timeout_s=0.5) == []
    def pulled(subscription: str) -> list[str]:
        return [json.loads(m.data)["job_id"] for m in pubsub.pull(subscription, 10, timeout_s=0.5)]

    assert pulled(contract.URGENT_REQUEST_SUBSCRIPTION) == ["ordinary"]
    request = pulled(contract.REQUEST_SUBSCRIPTION)
    assert not [job_id for job_id in request if job_id.startswith(contract.PROBE_MESSAGE["job_id"])]
