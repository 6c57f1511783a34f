"""Pub/Sub: the job topics, their pull subscriptions, dead-lettering and the service agent's grants.

Everything is built from ``runtime.protocol.contract`` and the stack's request queues
(``runtime.protocol.queues.topology``): one topic per ``TopicSpec``, one subscription per ``SubscriptionSpec``, the
contract's and a topic with its scheduler subscription per desk queue (stack config ``queues``). A subscription
whose spec names a dead-letter topic gets the dead-letter policy, the exponential retry policy and the grants the
Pub/Sub service agent needs to forward messages. Each queue's publishers (``requestPublishers`` for the default
queue, a desk's ``publishers``, ``urgentPublishers``) may publish to that queue's topic and nowhere else, which is
how a job's queue says who sent it; the scheduler's own grants are the identities component's.

Resources are named after their topic or subscription, so a desk added or removed adds or removes its own and
leaves every other queue's untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import pulumi
import pulumi_gcp as gcp

from runtime.protocol import contract, queues

TYPE: Final = "gpu-runtime:pubsub:PubSub"
# Subscriptions never protected, whatever the stack's deletionProtection (components/lifecycle.py): the deploy
# probe's holds only noop probes, kept a day, which a new probe replaces. Its topic moved from the request topic to
# the urgent one (issue 45), which Pub/Sub cannot change in place (a subscription's topic is fixed at creation), so
# the deploy replaces it; Pulumi refuses to replace a resource whose new state is protected and allows it when the
# program unprotects it in the same update (https://github.com/pulumi/pulumi/pull/8873).
_DISPOSABLE: Final = frozenset({contract.PROBE_SUBSCRIPTION})
# The component's recorded input: who the stack declares may publish to each queue topic (topic -> members), so
# that `gpurt plan`'s IAM proof (components.review.iam_proof) checks the bindings against the declaration.
QUEUE_PUBLISHERS_INPUT: Final = "queuePublishers"

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

    queues: tuple[queues.QueueSpec, ...] = queues.BUILT_IN_QUEUES
    """The stack's request queues (``StackConfig.queue_specs()``): a topic and a scheduler subscription each."""

    publishers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Queue name -> IAM members (``user:``, ``group:``, ``serviceAccount:``) who may publish to that queue: each
    gets ``roles/pubsub.publisher`` on the queue's topic alone (``StackConfig.queue_publishers()``)."""


class PubSub(pulumi.ComponentResource):
    """Request, result and dead-letter topics with their subscriptions (docs/architecture.md)."""

    topics: dict[str, gcp.pubsub.Topic]
    subscriptions: dict[str, gcp.pubsub.Subscription]

    def __init__(self, name: str, args: PubSubArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        unknown = sorted(set(args.publishers) - {queue.name for queue in args.queues})
        if unknown:
            raise ValueError(f"publishers named for queues the stack does not declare: {', '.join(unknown)}")
        by_name = {queue.name: queue for queue in args.queues}
        declared = {by_name[queue].topic: list(members) for queue, members in args.publishers.items()}
        super().__init__(TYPE, name, {QUEUE_PUBLISHERS_INPUT: declared}, opts)
        child = pulumi.ResourceOptions(parent=self)
        unprotected = pulumi.ResourceOptions(parent=self, protect=False)
        self._project = args.project
        topics, subscriptions = queues.topology(args.queues)
        self.topics = {
            spec.name: gcp.pubsub.Topic(
                f"{name}-{spec.name}", name=spec.name, project=args.project, labels=args.labels, opts=child
            )
            for spec in topics
        }
        service_agent = pulumi.Output.from_input(args.service_agent)
        self.subscriptions = {}
        forwarding_to: set[str] = set()
        for spec in subscriptions:
            subscription = self._subscription(name, spec, args, unprotected if spec.name in _DISPOSABLE else child)
            self.subscriptions[spec.name] = subscription
            if spec.dead_letter_topic:
                # One publisher grant per dead-letter topic, named after its first source subscription (the request
                # subscription's, as ever): identical IAM members would share one binding, and deleting either (a
                # desk removed) would take it away from every queue's dead-lettering.
                if spec.dead_letter_topic not in forwarding_to:
                    forwarding_to.add(spec.dead_letter_topic)
                    self._grant_agent_publisher(name, spec.name, spec.dead_letter_topic, service_agent, child)
                self._grant_agent_subscriber(name, spec.name, service_agent, child)

        for queue, members in args.publishers.items():
            # The default queue's grants keep the names they had before there were other queues.
            prefix = f"{name}-request" if queue == queues.DEFAULT_QUEUE else f"{name}-{by_name[queue].topic}"
            for index, member in enumerate(members):
                gcp.pubsub.TopicIAMMember(
                    f"{prefix}-publisher-{index}",
                    project=args.project,
                    topic=self.topics[by_name[queue].topic].name,
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

    def _grant_agent_publisher(
        self, name: str, source_subscription: str, dead_letter_topic: str, service_agent: pulumi.Output[str],
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

    def _grant_agent_subscriber(
        self, name: str, source_subscription: str, service_agent: pulumi.Output[str], opts: pulumi.ResourceOptions
    ) -> None:
        gcp.pubsub.SubscriptionIAMMember(
            f"{name}-{source_subscription}-agent-subscriber",
            project=self._project,
            subscription=self.subscriptions[source_subscription].name,
            role=contract.SOURCE_SUBSCRIPTION_AGENT_ROLE,
            member=service_agent,
            opts=opts,
        )
