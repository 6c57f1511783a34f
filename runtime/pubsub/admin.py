"""Create the contract's topics and subscriptions (the local platform and tests; Pulumi does it in the cloud)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from runtime.protocol import contract
from runtime.protocol.contract import SubscriptionSpec, TopicSpec

if TYPE_CHECKING:
    from google.cloud import pubsub_v1


def topic_path(project: str, topic: str) -> str:
    """``projects/<project>/topics/<topic>``."""
    return f"projects/{project}/topics/{topic}"


def subscription_path(project: str, subscription: str) -> str:
    """``projects/<project>/subscriptions/<subscription>``."""
    return f"projects/{project}/subscriptions/{subscription}"


def subscription_body(project: str, spec: SubscriptionSpec) -> dict[str, object]:
    """The Subscription resource for ``spec``, as the Pub/Sub API takes it."""
    body: dict[str, object] = {
        "name": subscription_path(project, spec.name),
        "topic": topic_path(project, spec.topic),
        "ack_deadline_seconds": spec.ack_deadline_s,
        "message_retention_duration": {"seconds": spec.retention_s},
    }
    if spec.dead_letter_topic:
        body["dead_letter_policy"] = {
            "dead_letter_topic": topic_path(project, spec.dead_letter_topic),
            "max_delivery_attempts": spec.max_delivery_attempts or contract.MAX_DELIVERY_ATTEMPTS,
        }
    if spec.filter:
        body["filter"] = spec.filter
    if spec.retry_min_backoff_s is not None:
        body["retry_policy"] = {
            "minimum_backoff": {"seconds": spec.retry_min_backoff_s},
            "maximum_backoff": {"seconds": spec.retry_max_backoff_s or contract.RETRY_MAX_BACKOFF_S},
        }
    return body


def ensure_topology(
    project: str,
    publisher: pubsub_v1.PublisherClient,
    subscriber: pubsub_v1.SubscriberClient,
    topics: Iterable[TopicSpec] = contract.TOPICS,
    subscriptions: Iterable[SubscriptionSpec] = contract.SUBSCRIPTIONS,
) -> list[str]:
    """Create whichever of ``topics`` and ``subscriptions`` are missing; returns the names it created.

    Existing resources are left as they are (creation is idempotent, so a second ``local up`` is
    harmless). Tests pass specs with shorter deadlines and backoffs to keep redelivery quick.
    """
    from google.api_core.exceptions import AlreadyExists

    created: list[str] = []
    for topic in topics:
        try:
            publisher.create_topic(request={"name": topic_path(project, topic.name)})
            created.append(topic.name)
        except AlreadyExists:
            pass
    for spec in subscriptions:
        try:
            subscriber.create_subscription(request=subscription_body(project, spec))
            created.append(spec.name)
        except AlreadyExists:
            pass
    return created
