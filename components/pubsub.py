"""Pub/Sub: the job topics, their pull subscriptions, dead-lettering and the service agent's grants.

Everything is built from ``runtime.protocol.contract``: one topic per ``TopicSpec``, one subscription per
``SubscriptionSpec``. A subscription whose spec names a dead-letter topic gets the dead-letter policy,
the exponential retry policy and the two grants the Pub/Sub service agent needs to forward messages. The
platform's users (stack config ``requestPublishers``) may publish to the request topic and nowhere else; the
scheduler's own grants are the identities component's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from runtime.protocol import contract

# Subscriptions expire after 31 idle days by default; an idle staging queue must not vanish.
_NEVER_EXPIRE = ""


def _duration(seconds: int) -> str:
    """Pub/Sub's duration format ("600s")."""
    return f"{seconds}s"


@dataclass
class PubSubArgs:
    """Inputs of the Pub/Sub component."""

    project: pulumi.Input[str]
    """GCP project id the topics live in."""

    service_agent: pulumi.Input[str]
    """The Pub/Sub service agent (``serviceAccount:…``) that forwards dead letters, once it exists."""

    labels: dict[str, str] = field(default_factory=lambda: dict(contract.GCP_LABELS))
    """Labels on every topic and subscription."""

    request_publishers: tuple[str, ...] = ()
    """IAM members (``user:``, ``group:``, ``serviceAccount:``) who may publish job requests: each gets
    ``roles/pubsub.publisher`` on the request topic alone (stack config ``requestPublishers``)."""


class PubSub(pulumi.ComponentResource):
    """Request, result and dead-letter topics with their subscriptions (docs/architecture.md)."""

    topics: dict[str, gcp.pubsub.Topic]
    subscriptions: dict[str, gcp.pubsub.Subscription]

    def __init__(self, name: str, args: PubSubArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-runtime:pubsub:PubSub", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self._project = args.project
        self.topics = {
            spec.name: gcp.pubsub.Topic(
                f"{name}-{spec.name}", name=spec.name, project=args.project, labels=args.labels, opts=child
            )
            for spec in contract.TOPICS
        }
        service_agent = pulumi.Output.from_input(args.service_agent)
        self.subscriptions = {}
        for spec in contract.SUBSCRIPTIONS:
            subscription = self._subscription(name, spec, args, child)
            self.subscriptions[spec.name] = subscription
            if spec.dead_letter_topic:
                self._grant_service_agent(name, spec.name, spec.dead_letter_topic, service_agent, child)

        for index, member in enumerate(args.request_publishers):
            gcp.pubsub.TopicIAMMember(
                f"{name}-request-publisher-{index}",
                project=args.project,
                topic=self.topics[contract.REQUEST_TOPIC].name,
                role=contract.REQUEST_PUBLISHER_ROLE,
                member=member,
                opts=child,
            )

        self.topic_names = {key: topic.name for key, topic in self.topics.items()}
        self.subscription_names = {key: sub.name for key, sub in self.subscriptions.items()}
        self.topic_ids = {key: topic.id for key, topic in self.topics.items()}
        self.subscription_ids = {key: sub.id for key, sub in self.subscriptions.items()}
        self.register_outputs({"topic_ids": self.topic_ids, "subscription_ids": self.subscription_ids})

    def _topic_path(self, topic: str) -> pulumi.Output[str]:
        # Built from the topic's name rather than its id so it is known during preview (policy checks read it).
        return pulumi.Output.all(self._project, self.topics[topic].name).apply(
            lambda parts: f"projects/{parts[0]}/topics/{parts[1]}"
        )

    def _subscription(
        self, name: str, spec: contract.SubscriptionSpec, args: PubSubArgs, opts: pulumi.ResourceOptions
    ) -> gcp.pubsub.Subscription:
        dead_letter = retry = None
        labels = dict(args.labels)
        if spec.dead_letter_topic:
            dead_letter = gcp.pubsub.SubscriptionDeadLetterPolicyArgs(
                dead_letter_topic=self._topic_path(spec.dead_letter_topic),
                max_delivery_attempts=spec.max_delivery_attempts,
            )
        else:
            key, value = contract.NO_DEAD_LETTER_LABEL
            labels[key] = value
        if spec.retry_min_backoff_s is not None and spec.retry_max_backoff_s is not None:
            retry = gcp.pubsub.SubscriptionRetryPolicyArgs(
                minimum_backoff=_duration(spec.retry_min_backoff_s),
                maximum_backoff=_duration(spec.retry_max_backoff_s),
            )
        return gcp.pubsub.Subscription(
            f"{name}-{spec.name}",
            name=spec.name,
            project=args.project,
            topic=self.topics[spec.topic].name,
            ack_deadline_seconds=spec.ack_deadline_s,
            message_retention_duration=_duration(spec.retention_s),
            dead_letter_policy=dead_letter,
            retry_policy=retry,
            expiration_policy=gcp.pubsub.SubscriptionExpirationPolicyArgs(ttl=_NEVER_EXPIRE),
            filter=spec.filter or None,
            labels=labels,
            opts=opts,
        )

    def _grant_service_agent(
        self,
        name: str,
        source_subscription: str,
        dead_letter_topic: str,
        service_agent: pulumi.Output[str],
        opts: pulumi.ResourceOptions,
    ) -> None:
        gcp.pubsub.TopicIAMMember(
            f"{name}-{source_subscription}-dlq-agent-publisher",
            project=self._project,
            topic=self.topics[dead_letter_topic].name,
            role=contract.DLQ_TOPIC_AGENT_ROLE,
            member=service_agent,
            opts=opts,
        )
        gcp.pubsub.SubscriptionIAMMember(
            f"{name}-{source_subscription}-agent-subscriber",
            project=self._project,
            subscription=self.subscriptions[source_subscription].name,
            role=contract.SOURCE_SUBSCRIPTION_AGENT_ROLE,
            member=service_agent,
            opts=opts,
        )
