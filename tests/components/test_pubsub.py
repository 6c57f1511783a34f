"""Pub/Sub component: the contract's topics and subscriptions with their exact settings and grants."""

from __future__ import annotations

import pytest

from components.pubsub import TYPE, PubSub, PubSubArgs
from components.review.plan import Recording
from components.review.plan_diff import diff_plans
from runtime.protocol import contract
from runtime.protocol.queues import DEFAULT_QUEUE, URGENT_QUEUE, QueueSpec, with_built_ins
from tests.components.infra import PROJECT, children_of, named, of_type, run

SUB = "gcp:pubsub/subscription:Subscription"


AGENT = "serviceAccount:service-123456789012@gcp-sa-pubsub.iam.gserviceaccount.com"


@pytest.fixture(scope="module")
def recording() -> Recording:
    return run(lambda: PubSub("pubsub", PubSubArgs(project=PROJECT, service_agent=AGENT)))


def test_topics_are_the_contracts(recording: Recording) -> None:
    assert {t.props["name"] for t in of_type(recording, "gcp:pubsub/topic:Topic")} == {
        "gpu-job-request", "gpu-job-request-urgent", "gpu-job-result", "gpu-job-request-dlq",
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
    # One publisher binding on the dead-letter topic, however many queues forward there (issue #45: two members
    # for one binding would take it away from every queue when either is deleted).
    [publisher] = of_type(recording, "gcp:pubsub/topicIAMMember:TopicIAMMember")
    assert publisher.name == "pubsub-gpu-job-request-sub-dlq-agent-publisher"  # its name from before the queues
    assert (publisher.props["topic"], publisher.props["role"], publisher.props["member"]) == (
        "gpu-job-request-dlq", "roles/pubsub.publisher", agent,
    )
    subscribers = of_type(recording, "gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember")
    assert {(s.props["subscription"], s.props["role"], s.props["member"]) for s in subscribers} == {
        ("gpu-job-request-sub", "roles/pubsub.subscriber", agent),
        ("gpu-job-request-urgent-sub", "roles/pubsub.subscriber", agent),
    }


def test_every_resource_is_parented_and_labelled(recording: Recording) -> None:
    children = children_of(recording, "pubsub")
    assert len(children) == len([r for r in recording.resources if r.custom]) == 12
    for resource in of_type(recording, SUB) + of_type(recording, "gcp:pubsub/topic:Topic"):
        assert resource.props["labels"]["part-of"] == "gpu-runtime"


def test_the_probe_subscription_admits_only_the_probe(recording: Recording) -> None:
    """issues #42, #45: the deploy probe's own subscription of the urgent topic, filtered on its attribute; the
    urgent queue's subscription leaves the probe out."""
    sub = named(recording, SUB, f"pubsub-{contract.PROBE_SUBSCRIPTION}").props
    assert sub["topic"] == contract.URGENT_REQUEST_TOPIC
    assert sub["filter"] == 'attributes.probe = "true"'
    assert "deadLetterPolicy" not in sub or sub["deadLetterPolicy"] is None
    assert sub["labels"][contract.NO_DEAD_LETTER_LABEL[0]] == contract.NO_DEAD_LETTER_LABEL[1]
    urgent = named(recording, SUB, f"pubsub-{contract.URGENT_REQUEST_SUBSCRIPTION}").props
    assert (urgent["topic"], urgent["filter"]) == (contract.URGENT_REQUEST_TOPIC, "NOT attributes:probe")


RATES, CREDIT = "group:rates@example.com", "group:credit@example.com"
ONCALL, USERS = "group:oncall@example.com", "user:quant@example.com"


def _queues(*desks: str) -> tuple[QueueSpec, ...]:
    return with_built_ins(QueueSpec(desk) for desk in desks)


def _with_desks(*desks: str) -> Recording:
    members = {"rates-desk": (RATES,), "credit-desk": (CREDIT,)}
    publishers = {DEFAULT_QUEUE: (USERS,), URGENT_QUEUE: (ONCALL,), **{desk: members[desk] for desk in desks}}
    return run(lambda: PubSub("pubsub", PubSubArgs(project=PROJECT, service_agent=AGENT, queues=_queues(*desks),
                                                   publishers=publishers)))


@pytest.fixture(scope="module")
def desks() -> Recording:
    return _with_desks("rates-desk", "credit-desk")


def test_each_desk_queue_has_a_topic_and_a_dead_lettering_scheduler_subscription(desks: Recording) -> None:
    for desk in ("rates-desk", "credit-desk"):
        sub = named(desks, SUB, f"pubsub-gpu-job-request-{desk}-sub").props
        assert sub["topic"] == f"gpu-job-request-{desk}"
        assert sub["deadLetterPolicy"] == {
            "deadLetterTopic": f"projects/{PROJECT}/topics/gpu-job-request-dlq", "maxDeliveryAttempts": 5}
        assert (sub["ackDeadlineSeconds"], sub["retryPolicy"]) == (600, {"minimumBackoff": "10s",
                                                                         "maximumBackoff": "600s"})
        [agent] = [r for r in of_type(desks, "gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember")
                   if r.props["subscription"] == f"gpu-job-request-{desk}-sub"]
        assert (agent.props["role"], agent.props["member"]) == ("roles/pubsub.subscriber", AGENT)


def test_each_queues_publishers_may_publish_to_its_topic_alone(desks: Recording) -> None:
    """issue #45: a job's queue is who sent it, so each desk publishes to its own topic and nowhere else."""
    granted = {(r.props["member"], r.props["topic"], r.props["role"])
               for r in of_type(desks, "gcp:pubsub/topicIAMMember:TopicIAMMember") if r.props["member"] != AGENT}
    assert granted == {
        (USERS, "gpu-job-request", "roles/pubsub.publisher"),
        (RATES, "gpu-job-request-rates-desk", "roles/pubsub.publisher"),
        (CREDIT, "gpu-job-request-credit-desk", "roles/pubsub.publisher"),
        (ONCALL, "gpu-job-request-urgent", "roles/pubsub.publisher"),
    }
    # The request topic's grants keep the names they had before the queues: a deploy does not replace them.
    assert named(desks, "gcp:pubsub/topicIAMMember:TopicIAMMember", "pubsub-request-publisher-0")


def test_publishers_of_a_queue_the_stack_does_not_declare_are_refused() -> None:
    with pytest.raises(ValueError, match="publishers named for queues the stack does not declare: fx-desk"):
        PubSub("refused", PubSubArgs(project=PROJECT, service_agent=AGENT, publishers={"fx-desk": (RATES,)}))


def _plan(recording: Recording) -> dict[str, object]:
    return {"stack": "test", "resources": [r.to_json() for r in recording.resources]}


@pytest.mark.parametrize(("before", "after"), [(("rates-desk",), ("rates-desk", "credit-desk")),
                                               (("rates-desk", "credit-desk"), ("credit-desk",))])
def test_a_desk_added_or_removed_leaves_every_other_queue_untouched(
        before: tuple[str, ...], after: tuple[str, ...]) -> None:
    """issue #45: resources are named after their topic or subscription, so the plan diff of a desk added (or
    removed) adds (or removes) that desk's resources only, and changes no other resource."""
    diff = diff_plans(_plan(_with_desks(*before)), _plan(_with_desks(*after)), "base")
    desk = (set(before) ^ set(after)).pop()
    moved = diff.added + diff.removed
    assert moved and all(desk in change.name for change in moved), moved
    assert {change.name for change in moved} == {
        f"pubsub-gpu-job-request-{desk}", f"pubsub-gpu-job-request-{desk}-sub",
        f"pubsub-gpu-job-request-{desk}-sub-agent-subscriber", f"pubsub-gpu-job-request-{desk}-publisher-0"}
    # Only the component's recorded declaration changes; no cloud resource is updated or replaced.
    assert [change.type for change in diff.changed] == [TYPE]
