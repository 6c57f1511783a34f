"""Pub/Sub checks against the real emulator through the real google-cloud-pubsub client."""

from __future__ import annotations

import json

import pytest

from runtime.protocol import contract
from runtime.protocol.queues import QueueSpec, topology, with_built_ins
from validation.checks import pubsub as checks
from validation.report import Status
from validation.runner import run_check

pytestmark = pytest.mark.timeout(60)
# An empty pull on the loopback emulator only waits; a second is plenty to see a waiting message.
PEEK_S = 1.0


def test_all_pubsub_checks_pass_on_the_contract_topology(pubsub) -> None:
    for check in (checks.topics_exist(pubsub), checks.dlq_subscriptions_exist(pubsub),
                  checks.dlqs_empty(pubsub, PEEK_S), checks.subscription_settings(pubsub)):
        result = run_check(check)
        assert result.status is Status.PASS, result


def test_deleted_dlq_subscription_is_named_with_the_fix(pubsub) -> None:
    pubsub.delete_subscription(contract.REQUEST_DLQ_SUBSCRIPTION)

    result = run_check(checks.dlq_subscriptions_exist(pubsub))

    assert result.status is Status.FAIL
    assert f"{contract.REQUEST_DLQ_SUBSCRIPTION} is missing" in result.evidence
    assert "drops every dead letter" in result.fix
    assert run_check(checks.topics_exist(pubsub)).status is Status.PASS


def test_changed_ack_deadline_fails_settings_with_actual_and_expected(pubsub) -> None:
    pubsub._subscriber.update_subscription(request={
        "subscription": {"name": f"projects/{pubsub.project}/subscriptions/{contract.REQUEST_SUBSCRIPTION}",
                         "ack_deadline_seconds": 30},
        "update_mask": {"paths": ["ack_deadline_seconds"]},
    })

    result = run_check(checks.subscription_settings(pubsub))

    assert result.status is Status.FAIL
    assert result.evidence == f"{contract.REQUEST_SUBSCRIPTION}: ack deadline (s) is 30, expected 600"


def test_missing_topic_fails_topics_check(emulator) -> None:
    from validation.adapters.pubsub import GooglePubSubAdmin

    admin = GooglePubSubAdmin.for_emulator(emulator.address, "empty-project")
    admin._publisher.create_topic(request={"name": f"projects/empty-project/topics/{contract.REQUEST_TOPIC}"})

    result = run_check(checks.topics_exist(admin))

    assert result.status is Status.FAIL
    assert result.evidence == (f"missing topics: {contract.URGENT_REQUEST_TOPIC}, {contract.RESULT_TOPIC}, "
                               f"{contract.REQUEST_DLQ_TOPIC}")


def test_dead_letter_is_reported_by_job_id_and_left_in_place(pubsub) -> None:
    pubsub.publish(contract.REQUEST_DLQ_TOPIC, json.dumps({"job_id": "poison-1", "type": "noop"}).encode(), {})

    first = run_check(checks.dlqs_empty(pubsub, PEEK_S))
    second = run_check(checks.dlqs_empty(pubsub, PEEK_S))

    assert first.status is Status.FAIL
    assert "poison-1" in first.evidence and "gpurt dlq replay" in first.fix
    assert second.evidence == first.evidence  # the peek released the message: nothing was consumed


def test_a_missing_dlq_subscription_fails_one_check_only(pubsub) -> None:
    pubsub.delete_subscription(contract.REQUEST_DLQ_SUBSCRIPTION)

    statuses = {check.name: run_check(check).status for check in (
        checks.topics_exist(pubsub), checks.dlq_subscriptions_exist(pubsub), checks.dlqs_empty(pubsub, PEEK_S),
        checks.subscription_settings(pubsub))}

    assert statuses == {"pubsub.topics": Status.PASS, "pubsub.dlq-subscriptions": Status.FAIL,
                        "pubsub.dlq-empty": Status.SKIP, "pubsub.subscription-settings": Status.PASS}


def test_every_queue_the_stack_declares_is_expected_with_its_dead_letter_policy(emulator) -> None:
    """issue #45: a desk's topic and subscription are checked like the request subscription: missing fails, and a
    subscription without its dead-letter policy fails, naming what differs."""
    from runtime.pubsub.admin import ensure_topology
    from validation.adapters.pubsub import GooglePubSubAdmin

    admin = GooglePubSubAdmin.for_emulator(emulator.address, "desk-project")
    desks = with_built_ins([QueueSpec("rates-desk", weight=2)])
    ensure_topology("desk-project", admin._publisher, admin._subscriber)  # the contract's only

    missing = run_check(checks.topics_exist(admin, desks))
    assert (missing.status, missing.evidence) == (Status.FAIL, "missing topics: gpu-job-request-rates-desk")
    assert run_check(checks.subscription_settings(admin, desks)).evidence == "gpu-job-request-rates-desk-sub: missing"

    admin._publisher.create_topic(request={"name": "projects/desk-project/topics/gpu-job-request-rates-desk"})
    admin.create_subscription("gpu-job-request-rates-desk-sub", "gpu-job-request-rates-desk",
                              contract.ACK_DEADLINE_S)  # no dead-letter policy, no retry policy, a week's retention
    lax = run_check(checks.subscription_settings(admin, desks))
    assert lax.status is Status.FAIL
    assert "gpu-job-request-rates-desk-sub: dead-letter topic is None, expected gpu-job-request-dlq" in lax.evidence

    admin.delete_subscription("gpu-job-request-rates-desk-sub")
    ensure_topology("desk-project", admin._publisher, admin._subscriber, *topology(desks))
    for check in (checks.topics_exist(admin, desks), checks.subscription_settings(admin, desks)):
        result = run_check(check)
        assert result.status is Status.PASS, result
