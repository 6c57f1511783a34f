"""Creates the contract's topics and subscriptions on the local emulator (idempotent)."""

from __future__ import annotations

from typing import Any

from components.contract import SUBSCRIPTIONS, TOPICS, SubscriptionSpec
from runtime.client.pubsub import PubSubClients


def subscription_request(clients: PubSubClients, spec: SubscriptionSpec) -> dict[str, Any]:
    """The CreateSubscription request for ``spec``, exactly as the Pulumi component declares it."""
    request: dict[str, Any] = {
        "name": clients.subscription(spec.name),
        "topic": clients.topic(spec.topic),
        "ack_deadline_seconds": spec.ack_deadline_s,
        "message_retention_duration": {"seconds": spec.retention_s},
    }
    if spec.dead_letter_topic:
        request["dead_letter_policy"] = {
            "dead_letter_topic": clients.topic(spec.dead_letter_topic),
            "max_delivery_attempts": spec.max_delivery_attempts,
        }
    if spec.retry_min_backoff_s is not None:
        request["retry_policy"] = {
            "minimum_backoff": {"seconds": spec.retry_min_backoff_s},
            "maximum_backoff": {"seconds": spec.retry_max_backoff_s},
        }
    return request


def ensure_topology(clients: PubSubClients) -> list[str]:
    """Create every contract topic and subscription that is missing; returns what was created."""
    from google.api_core.exceptions import AlreadyExists

    created = []
    for topic in TOPICS:
        try:
            clients.publisher.create_topic(request={"name": clients.topic(topic.name)})
            created.append(topic.name)
        except AlreadyExists:
            pass
    for spec in SUBSCRIPTIONS:
        try:
            clients.subscriber.create_subscription(request=subscription_request(clients, spec))
            created.append(spec.name)
        except AlreadyExists:
            pass
    return created
