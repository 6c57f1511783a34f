"""Pub/Sub component: the contract's topics and subscriptions with their exact settings and grants."""

from __future__ import annotations

import pytest

from components.pubsub import PubSub, PubSubArgs
from components.review.plan import Recording
from runtime.protocol import contract
from tests.components.infra import PROJECT, children_of, named, of_type, run

SUB = "gcp:pubsub/subscription:Subscription"


AGENT = "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com"


@pytest.fixture(scope="module")
def recording() -> Recording:
    return run(lambda: PubSub("pubsub", PubSubArgs(project=PROJECT, service_agent=AGENT)))


def test_topics_are_the_contracts(recording: Recording) -> None:
    assert {t.props["name"] for t in of_type(recording, "gcp:pubsub/topic:Topic")} == {
        "gpu-job-request", "gpu-job-result", "gpu-job-request-dlq",
    }


def test_request_subscription_has_seed_settings(recording: Recording) -> None:
    sub = named(recording, SUB, "pubsub-gpu-job-request-sub").props
    assert sub["topic"] == "gpu-job-request"
    assert sub["ackDeadlineSeconds"] == 600
    assert sub["messageRetentionDuration"] == "604800s"
    assert sub["deadLetterPolicy"] == {
        "deadLetterTopic": f"projects/{PROJECT}/topics/gpu-job-request-dlq", "maxDeliveryAttempts": 5,
    }
    assert sub["retryPolicy"] == {"minimumBackoff": "10s", "maximumBackoff": "600s"}
    # An idle subscription must never expire.
    assert sub["expirationPolicy"] == {"ttl": ""}


def test_dead_letter_topic_has_its_own_subscription(recording: Recording) -> None:
    dlq = named(recording, SUB, "pubsub-gpu-job-request-dlq-sub").props
    assert dlq["topic"] == "gpu-job-request-dlq"
    assert "deadLetterPolicy" not in dlq
    key, value = contract.NO_DEAD_LETTER_LABEL
    assert dlq["labels"][key] == value


def test_result_subscription(recording: Recording) -> None:
    result = named(recording, SUB, "pubsub-gpu-job-result-sub").props
    assert (result["topic"], result["ackDeadlineSeconds"]) == ("gpu-job-result", 600)


def test_service_agent_can_forward_dead_letters(recording: Recording) -> None:
    agent = AGENT
    [publisher] = of_type(recording, "gcp:pubsub/topicIAMMember:TopicIAMMember")
    assert (publisher.props["topic"], publisher.props["role"], publisher.props["member"]) == (
        "gpu-job-request-dlq", "roles/pubsub.publisher", agent,
    )
    [subscriber] = of_type(recording, "gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember")
    assert (subscriber.props["subscription"], subscriber.props["role"], subscriber.props["member"]) == (
        "gpu-job-request-sub", "roles/pubsub.subscriber", agent,
    )


def test_every_resource_is_parented_and_labelled(recording: Recording) -> None:
    children = children_of(recording, "pubsub")
    assert len(children) == len([r for r in recording.resources if r.custom]) == 9
    for resource in of_type(recording, SUB) + of_type(recording, "gcp:pubsub/topic:Topic"):
        assert resource.props["labels"]["part-of"] == "gpu-runtime"


def test_the_probe_subscription_admits_only_the_probe(recording: Recording) -> None:
    """issue #42: the deploy probe's own subscription of the request topic, filtered on its attribute."""
    sub = named(recording, SUB, f"pubsub-{contract.PROBE_SUBSCRIPTION}").props
    assert sub["topic"] == contract.REQUEST_TOPIC
    assert sub["filter"] == 'attributes.probe = "true"'
    assert "deadLetterPolicy" not in sub or sub["deadLetterPolicy"] is None
    assert sub["labels"][contract.NO_DEAD_LETTER_LABEL[0]] == contract.NO_DEAD_LETTER_LABEL[1]
