"""Pub/Sub administration seam and its adapter over the google-cloud-pubsub GAPIC clients.

The adapter reaches Google Cloud, or the project's emulator when built with ``for_emulator`` (the same
wire protocol, so the local platform is validated by the very code that validates a stack).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

# A synchronous pull on an empty subscription blocks until its deadline: this bounds a peek (seconds).
PEEK_TIMEOUT_S = 5.0

ResourceKind = Literal["topic", "subscription"]


@dataclass(frozen=True)
class SubscriptionInfo:
    """The settings of a subscription that the contract pins down (times in seconds)."""

    name: str
    topic: str
    ack_deadline_s: int
    retention_s: float
    dead_letter_topic: str | None = None
    max_delivery_attempts: int | None = None
    retry_min_backoff_s: float | None = None
    retry_max_backoff_s: float | None = None


@dataclass(frozen=True)
class PulledMessage:
    """A message received by a synchronous pull."""

    message_id: str
    data: bytes
    ack_id: str
    attributes: Mapping[str, str] = field(default_factory=dict)
    delivery_attempt: int = 0


class PubSubAdmin(Protocol):
    """What validation needs from Pub/Sub; names are short (``gpu-job-request``), not resource paths."""

    project: str

    def topic_names(self) -> set[str]:
        """Short names of the project's topics."""
        ...

    def subscription(self, name: str) -> SubscriptionInfo | None:
        """A subscription's settings, or ``None`` when it does not exist."""
        ...

    def create_subscription(self, name: str, topic: str, ack_deadline_s: int) -> None:
        """Create a plain pull subscription."""
        ...

    def delete_subscription(self, name: str) -> None:
        """Delete a subscription (missing is fine)."""
        ...

    def publish(self, topic: str, data: bytes, attributes: Mapping[str, str]) -> str:
        """Publish one message; returns its id."""
        ...

    def pull(self, subscription: str, max_messages: int, timeout_s: float) -> list[PulledMessage]:
        """Pull up to ``max_messages``; an empty list when none arrive within ``timeout_s``."""
        ...

    def acknowledge(self, subscription: str, ack_ids: list[str]) -> None:
        """Acknowledge pulled messages."""
        ...

    def release(self, subscription: str, ack_ids: list[str]) -> None:
        """Hand pulled messages back at once (ack deadline 0) without acknowledging them."""
        ...

    def iam_members(self, kind: ResourceKind, name: str, role: str) -> set[str]:
        """Members holding ``role`` on a topic or subscription (Google Cloud only)."""
        ...


class GooglePubSubAdmin:
    """``PubSubAdmin`` over ``google.pubsub_v1`` (Google Cloud, or an emulator via ``for_emulator``)."""

    def __init__(self, project: str, publisher: Any = None, subscriber: Any = None) -> None:
        from google import pubsub_v1

        self.project = project
        self._publisher = publisher or pubsub_v1.PublisherClient()
        self._subscriber = subscriber or pubsub_v1.SubscriberClient()

    @classmethod
    def for_emulator(cls, host: str, project: str, token: str | None = None) -> GooglePubSubAdmin:
        """An adapter talking plaintext gRPC to an emulator at ``host:port``, as PUBSUB_EMULATOR_HOST does, sending
        ``token`` where the emulator takes credentials (the local platform's broker: its operator's token)."""
        from google import pubsub_v1
        from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport
        from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

        from runtime.pubsub.clients import emulator_channel

        publisher = pubsub_v1.PublisherClient(transport=PublisherGrpcTransport(channel=emulator_channel(host, token)))
        subscriber = pubsub_v1.SubscriberClient(
            transport=SubscriberGrpcTransport(channel=emulator_channel(host, token)))
        return cls(project, publisher, subscriber)

    def _topic(self, name: str) -> str:
        return f"projects/{self.project}/topics/{name}"

    def _subscription(self, name: str) -> str:
        return f"projects/{self.project}/subscriptions/{name}"

    def topic_names(self) -> set[str]:
        """Short names of the project's topics."""
        topics = self._publisher.list_topics(request={"project": f"projects/{self.project}"})
        return {topic.name.rsplit("/", 1)[-1] for topic in topics}

    def subscription(self, name: str) -> SubscriptionInfo | None:
        """A subscription's settings, or ``None`` when it does not exist."""
        from google.api_core.exceptions import NotFound

        try:
            sub = self._subscriber.get_subscription(request={"subscription": self._subscription(name)})
        except NotFound:
            return None
        return subscription_info(sub)

    def create_subscription(self, name: str, topic: str, ack_deadline_s: int) -> None:
        """Create a plain pull subscription."""
        self._subscriber.create_subscription(request={
            "name": self._subscription(name), "topic": self._topic(topic), "ack_deadline_seconds": ack_deadline_s})

    def delete_subscription(self, name: str) -> None:
        """Delete a subscription (missing is fine)."""
        from google.api_core.exceptions import NotFound

        with contextlib.suppress(NotFound):
            self._subscriber.delete_subscription(request={"subscription": self._subscription(name)})

    def publish(self, topic: str, data: bytes, attributes: Mapping[str, str]) -> str:
        """Publish one message; returns its id."""
        response = self._publisher.publish(
            request={"topic": self._topic(topic), "messages": [{"data": data, "attributes": dict(attributes)}]})
        return response.message_ids[0]

    def pull(self, subscription: str, max_messages: int, timeout_s: float) -> list[PulledMessage]:
        """Pull up to ``max_messages``; an empty list when none arrive within ``timeout_s``."""
        from google.api_core.exceptions import DeadlineExceeded

        try:
            response = self._subscriber.pull(
                request={"subscription": self._subscription(subscription), "max_messages": max_messages},
                timeout=timeout_s)
        except DeadlineExceeded:
            return []
        return [PulledMessage(message_id=r.message.message_id, data=bytes(r.message.data), ack_id=r.ack_id,
                              attributes=dict(r.message.attributes), delivery_attempt=r.delivery_attempt)
                for r in response.received_messages]

    def acknowledge(self, subscription: str, ack_ids: list[str]) -> None:
        """Acknowledge pulled messages."""
        if ack_ids:
            self._subscriber.acknowledge(
                request={"subscription": self._subscription(subscription), "ack_ids": ack_ids})

    def release(self, subscription: str, ack_ids: list[str]) -> None:
        """Hand pulled messages back at once (ack deadline 0) without acknowledging them."""
        if ack_ids:
            self._subscriber.modify_ack_deadline(request={
                "subscription": self._subscription(subscription), "ack_ids": ack_ids, "ack_deadline_seconds": 0})

    def iam_members(self, kind: ResourceKind, name: str, role: str) -> set[str]:
        """Members holding ``role`` on a topic or subscription."""
        if kind == "topic":
            policy = self._publisher.get_iam_policy(request={"resource": self._topic(name)})
        else:
            policy = self._subscriber.get_iam_policy(request={"resource": self._subscription(name)})
        return {member for binding in policy.bindings if binding.role == role for member in binding.members}


def subscription_info(sub: Any) -> SubscriptionInfo:
    """A ``google.pubsub_v1.Subscription`` as a ``SubscriptionInfo`` (short names, seconds)."""
    dead_letter = sub.dead_letter_policy
    has_dead_letter = bool(dead_letter.dead_letter_topic)
    has_retry = "retry_policy" in sub
    return SubscriptionInfo(
        name=sub.name.rsplit("/", 1)[-1],
        topic=sub.topic.rsplit("/", 1)[-1],
        ack_deadline_s=sub.ack_deadline_seconds,
        retention_s=sub.message_retention_duration.total_seconds(),
        dead_letter_topic=dead_letter.dead_letter_topic.rsplit("/", 1)[-1] if has_dead_letter else None,
        max_delivery_attempts=dead_letter.max_delivery_attempts if has_dead_letter else None,
        retry_min_backoff_s=sub.retry_policy.minimum_backoff.total_seconds() if has_retry else None,
        retry_max_backoff_s=sub.retry_policy.maximum_backoff.total_seconds() if has_retry else None,
    )
