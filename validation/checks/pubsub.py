"""Pub/Sub checks of the contract: topics, dead-letter subscriptions and their backlog, settings, agent grants.

The topics and subscriptions expected are the contract's and each request queue's of the stack's config
(``runtime.protocol.queues.topology``; ``validation.build`` renders the queues from the deployed config), so a
desk's topic or subscription missing, or its dead-letter policy gone, fails like the request subscription's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

from runtime.protocol import contract
from runtime.protocol.queues import BUILT_IN_QUEUES, QueueSpec, topology
from validation.adapters.pubsub import PEEK_TIMEOUT_S, PubSubAdmin, SubscriptionInfo
from validation.runner import Check, CheckFailed, CheckSkipped

# How many dead letters a peek shows as evidence; enough to see a pattern, short enough for a table.
DLQ_PEEK_MESSAGES = 10


def _dead_letter_subscriptions() -> list[contract.SubscriptionSpec]:
    dlq_topics = {t.name for t in contract.TOPICS if t.is_dead_letter}
    return [s for s in contract.SUBSCRIPTIONS if s.topic in dlq_topics]


def topics_exist(pubsub: PubSubAdmin, queues: Sequence[QueueSpec] = BUILT_IN_QUEUES) -> Check:
    """Every topic of the contract and of each of ``queues`` exists."""

    def run() -> str:
        present = pubsub.topic_names()
        topics, _ = topology(queues)
        missing = [t.name for t in topics if t.name not in present]
        if missing:
            raise CheckFailed(f"missing topics: {', '.join(missing)}",
                              f"create {', '.join(missing)} in project {pubsub.project} (pulumi up creates them)")
        return f"{len(topics)} topics present: {', '.join(t.name for t in topics)}"

    return Check("pubsub.topics", run)


def dlq_subscriptions_exist(pubsub: PubSubAdmin) -> Check:
    """Every dead-letter topic has its subscription, attached to the right topic."""

    def run() -> str:
        problems = []
        for spec in _dead_letter_subscriptions():
            info = pubsub.subscription(spec.name)
            if info is None:
                problems.append(f"{spec.name} is missing")
            elif info.topic != spec.topic:
                problems.append(f"{spec.name} is on topic {info.topic}, expected {spec.topic}")
        if problems:
            raise CheckFailed("; ".join(problems),
                              "create the dead-letter subscription(s) on their DLQ topic; a DLQ topic without "
                              "a subscription drops every dead letter (pulumi up restores them)")
        return "dead-letter subscriptions present: " + ", ".join(s.name for s in _dead_letter_subscriptions())

    return Check("pubsub.dlq-subscriptions", run)


def dlqs_empty(pubsub: PubSubAdmin, peek_timeout_s: float = PEEK_TIMEOUT_S) -> Check:
    """No message waits in a dead-letter subscription (peeked, then released untouched)."""

    def run() -> str:
        found: list[str] = []
        present = [spec for spec in _dead_letter_subscriptions() if pubsub.subscription(spec.name) is not None]
        if not present:
            # Not a second failure for one cause: pubsub.dlq-subscriptions already names the missing ones.
            raise CheckSkipped("no dead-letter subscription exists to read (see pubsub.dlq-subscriptions)")
        for spec in present:
            messages = pubsub.pull(spec.name, DLQ_PEEK_MESSAGES, timeout_s=peek_timeout_s)
            pubsub.release(spec.name, [m.ack_id for m in messages])
            found += [f"{spec.name}: {_job_id(m.data, m.attributes)}" for m in messages]
        if found:
            more = "+" if len(found) >= DLQ_PEEK_MESSAGES else ""
            raise CheckFailed(f"{len(found)}{more} dead letter(s): {'; '.join(found)}",
                              "inspect them with `gpurt dlq inspect`, fix the cause, then `gpurt dlq replay` "
                              "(docs/runbooks/dlq-storm.md)")
        return "dead-letter subscriptions are empty"

    return Check("pubsub.dlq-empty", run)


def _job_id(data: bytes, attributes: Mapping[str, str]) -> str:
    if "job_id" in attributes:
        return attributes["job_id"]
    try:
        body = json.loads(data)
    except ValueError:
        return "<unparseable body>"
    return str(body.get("job_id", "<no job_id>")) if isinstance(body, dict) else "<not an object>"


def _differences(spec: contract.SubscriptionSpec, info: SubscriptionInfo) -> list[str]:
    expected: dict[str, object] = {
        "topic": spec.topic,
        "ack deadline (s)": spec.ack_deadline_s,
        "retention (s)": spec.retention_s,
    }
    actual: dict[str, object] = {
        "topic": info.topic,
        "ack deadline (s)": info.ack_deadline_s,
        "retention (s)": int(info.retention_s),
    }
    if spec.dead_letter_topic is not None:
        expected |= {"dead-letter topic": spec.dead_letter_topic, "max delivery attempts": spec.max_delivery_attempts}
        actual |= {"dead-letter topic": info.dead_letter_topic, "max delivery attempts": info.max_delivery_attempts}
    if spec.retry_min_backoff_s is not None:
        expected |= {"retry backoff (s)": (spec.retry_min_backoff_s, spec.retry_max_backoff_s)}
        backoff = (info.retry_min_backoff_s, info.retry_max_backoff_s)
        actual |= {"retry backoff (s)": None if None in backoff else tuple(int(b or 0) for b in backoff)}
    return [f"{key} is {actual[key]}, expected {value}" for key, value in expected.items() if actual[key] != value]


def subscription_settings(pubsub: PubSubAdmin, queues: Sequence[QueueSpec] = BUILT_IN_QUEUES) -> Check:
    """Every subscription's ack deadline, retention, dead-letter policy and retry policy match the contract, each
    of ``queues``' scheduler subscription included."""

    def run() -> str:
        problems = []
        dead_letter = {spec.name for spec in _dead_letter_subscriptions()}
        _, subscriptions = topology(queues)
        for spec in subscriptions:
            info = pubsub.subscription(spec.name)
            if info is None:
                if spec.name not in dead_letter:  # a missing DLQ subscription is pubsub.dlq-subscriptions' finding
                    problems.append(f"{spec.name}: missing")
                continue
            problems += [f"{spec.name}: {d}" for d in _differences(spec, info)]
        if problems:
            raise CheckFailed("; ".join(problems),
                              "set the listed subscription fields back to the contract (runtime/protocol/contract.py); "
                              "`pulumi up` or `gpurt local up` reconciles them")
        request = contract.REQUEST_SUBSCRIPTION_SPEC
        return (f"{len(subscriptions)} subscriptions match: ack {request.ack_deadline_s}s, retention "
                f"{request.retention_s}s, {request.max_delivery_attempts} attempts to {request.dead_letter_topic}")

    return Check("pubsub.subscription-settings", run)


def service_agent_grants(pubsub: PubSubAdmin, project_number: Callable[[], str],
                         queues: Sequence[QueueSpec] = BUILT_IN_QUEUES) -> Check:
    """The Pub/Sub service agent may publish to each DLQ topic, and nobody else may; it may subscribe to each
    source subscription (each of ``queues``' included)."""

    def run() -> str:
        agent = "serviceAccount:" + contract.PUBSUB_SERVICE_AGENT.format(project_number=project_number())
        missing = []
        sources = [spec for spec in topology(queues)[1] if spec.dead_letter_topic is not None]
        # Every queue forwards to the one dead-letter topic: its policy is read once.
        for dead_letter_topic in dict.fromkeys(str(spec.dead_letter_topic) for spec in sources):
            publishers = pubsub.iam_members("topic", dead_letter_topic, contract.DLQ_TOPIC_AGENT_ROLE)
            if agent not in publishers:
                missing.append(f"{contract.DLQ_TOPIC_AGENT_ROLE} on topic {dead_letter_topic}")
            if others := sorted(publishers - {agent}):
                raise CheckFailed(f"{', '.join(others)} may publish to {dead_letter_topic}, whose messages the "
                                  "leader answers as dead letters",
                                  f"remove them from the topic's {contract.DLQ_TOPIC_AGENT_ROLE} binding: only the "
                                  "Pub/Sub service agent may publish there (docs/scheduler.md, who may publish where)")
        for spec in sources:
            if agent not in pubsub.iam_members("subscription", spec.name, contract.SOURCE_SUBSCRIPTION_AGENT_ROLE):
                missing.append(f"{contract.SOURCE_SUBSCRIPTION_AGENT_ROLE} on subscription {spec.name}")
        if missing:
            raise CheckFailed(f"{agent} lacks {'; '.join(missing)}",
                              "grant the Pub/Sub service agent these roles, or dead-lettering silently does "
                              "nothing (the Pub/Sub component declares them)")
        return f"{agent} holds publisher on the DLQ topic and subscriber on each source subscription"

    return Check("pubsub.service-agent", run)
