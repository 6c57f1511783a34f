"""Request queues: where each desk may publish, and the weights by which the gpu-scheduler shares its slots.

A queue is a request topic with one scheduler subscription. Who a request came from is the queue it arrived
on, never a field of its body: IAM lets a desk's members publish to their own topic and nowhere else
(``components/pubsub.py``), so a desk cannot pass its jobs off as another's. Every stack has two queues
whatever its config declares:

- ``default``: ``gpu-job-request`` and its subscription, the topic the platform has always had (stack config
  ``requestPublishers``); what ``gpurt submit`` and ``gpurt.Client`` use when no queue is named.
- ``urgent``: ``gpu-job-request-urgent``, for the deploy probe and on-call operators. Its jobs take the next
  free slot ahead of every other queue's backlog; it has no weight and no cap.

Stack config ``queues`` adds a queue per desk, each with a weight (its share of the slots while several
queues have work waiting) and optionally a cap on the slots its jobs may hold at once. docs/scheduler.md
("Queues") describes the model and what it does not promise.

This module is part of the contract (``runtime.protocol.contract``): the Pulumi program, the gpu-scheduler,
the local platform, the Python API and validation all take queue names, topics and subscriptions from here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Final

from runtime.protocol.contract import (
    REQUEST_SUBSCRIPTION,
    REQUEST_SUBSCRIPTION_SPEC,
    REQUEST_TOPIC,
    SUBSCRIPTIONS,
    TOPICS,
    URGENT_REQUEST_SUBSCRIPTION_SPEC,
    SubscriptionSpec,
    TopicSpec,
)

DEFAULT_QUEUE: Final = "default"
URGENT_QUEUE: Final = "urgent"
# A desk's queue name becomes part of a topic and a subscription name (``gpu-job-request-<name>``) and a metric
# label: a lowercase DNS label, short enough that every name built from it stays within Pub/Sub's limits.
QUEUE_NAME_RE: Final = re.compile(r"^[a-z]([a-z0-9-]{0,28}[a-z0-9])?$")
MAX_WEIGHT: Final = 1000


class QueueError(ValueError):
    """A queue declaration that cannot be used (bad name, weight or cap; a name declared twice)."""


@dataclass(frozen=True)
class QueueSpec:
    """One request queue: its name, its share of the slots and its cap (``max_slots``; None: no cap)."""

    name: str
    weight: int = 1
    max_slots: int | None = None

    def __post_init__(self) -> None:
        if not QUEUE_NAME_RE.match(self.name):
            raise QueueError(f"queue name {self.name!r} must be a lowercase DNS label of at most 30 characters "
                             "(letters, digits and '-', starting with a letter)")
        if not 1 <= self.weight <= MAX_WEIGHT:
            raise QueueError(f"queue {self.name}: weight {self.weight} must be between 1 and {MAX_WEIGHT}")
        if self.max_slots is not None and self.max_slots < 1:
            raise QueueError(f"queue {self.name}: maxSlots {self.max_slots} must be at least 1 (or left out)")
        if self.urgent and (self.weight != 1 or self.max_slots is not None):
            raise QueueError("the urgent queue goes ahead of every other: it takes neither a weight nor a cap")
        if self.name not in (DEFAULT_QUEUE, URGENT_QUEUE) and (
                self.topic in {t.name for t in TOPICS} or self.subscription in {s.name for s in SUBSCRIPTIONS}):
            # "dlq" would make gpu-job-request-dlq, the dead-letter topic, a desk's request topic.
            raise QueueError(f"queue name {self.name!r} is taken: its topic or subscription is the platform's own")

    @property
    def urgent(self) -> bool:
        """Whether this is the urgent class, whose jobs take the next free slot ahead of any backlog."""
        return self.name == URGENT_QUEUE

    @property
    def topic(self) -> str:
        """The request topic this queue's members publish to."""
        return request_topic(self.name)

    @property
    def subscription(self) -> str:
        """The gpu-scheduler's subscription of this queue's topic."""
        return request_subscription(self.name)

    def subscription_spec(self) -> SubscriptionSpec:
        """The scheduler subscription's settings: the request subscription's, on this queue's topic."""
        if self.name == DEFAULT_QUEUE:
            return REQUEST_SUBSCRIPTION_SPEC
        if self.urgent:
            return URGENT_REQUEST_SUBSCRIPTION_SPEC
        return replace(REQUEST_SUBSCRIPTION_SPEC, name=self.subscription, topic=self.topic)


def request_topic(queue: str) -> str:
    """The topic requests for ``queue`` are published to (``default``: ``gpu-job-request``)."""
    return REQUEST_TOPIC if queue == DEFAULT_QUEUE else f"{REQUEST_TOPIC}-{queue}"


def request_subscription(queue: str) -> str:
    """The gpu-scheduler's subscription of ``queue``'s topic (``default``: ``gpu-job-request-sub``)."""
    return REQUEST_SUBSCRIPTION if queue == DEFAULT_QUEUE else f"{request_topic(queue)}-sub"


BUILT_IN_QUEUES: Final = (QueueSpec(DEFAULT_QUEUE), QueueSpec(URGENT_QUEUE))


def with_built_ins(declared: Iterable[QueueSpec]) -> tuple[QueueSpec, ...]:
    """``declared`` plus the built-in queues it does not name, default first and urgent last.

    A declaration named ``default`` sets the default queue's weight and cap; ``urgent`` cannot be declared
    differently (``QueueSpec`` refuses a weight or cap on it). Raises ``QueueError`` on a name given twice.
    """
    declared = tuple(declared)
    names = [queue.name for queue in declared]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise QueueError(f"queue names must be unique; declared more than once: {', '.join(twice)}")
    by_name = {queue.name: queue for queue in declared}
    default = by_name.pop(DEFAULT_QUEUE, QueueSpec(DEFAULT_QUEUE))
    urgent = by_name.pop(URGENT_QUEUE, QueueSpec(URGENT_QUEUE))
    return (default, *by_name.values(), urgent)



def queue_name_of_subscription(subscription: str) -> str:
    """The name of the queue whose scheduler subscription is ``subscription`` (a name or a full path), read from
    the name alone (``request_subscription``'s inverse), for tools that do not have the stack's queue list: a dead
    letter's ``CloudPubSubDeadLetterSourceSubscription`` says which queue to replay it to. ``QueueError`` for a
    subscription that is no queue's."""
    name = subscription.rsplit("/", 1)[-1]
    if name == REQUEST_SUBSCRIPTION:
        return DEFAULT_QUEUE
    queue = name.removeprefix(f"{REQUEST_TOPIC}-").removesuffix("-sub")
    try:
        spec = QueueSpec(queue)
    except QueueError:
        spec = None
    if spec is None or spec.subscription != name:
        raise QueueError(f"{name!r} is not a request queue's subscription")
    return queue



def encode(queues: Sequence[QueueSpec]) -> str:
    """``queues`` as the JSON the gpu-scheduler reads from ``SchedulerEnv.QUEUES``."""
    return json.dumps([{"name": q.name, "weight": q.weight, "max_slots": q.max_slots} for q in queues],
                      separators=(",", ":"))


def decode(text: str) -> tuple[QueueSpec, ...]:
    """The queues ``encode`` wrote, with the built-in ones added; ``QueueError`` names what is wrong."""
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as exc:
        raise QueueError(f"queues are not JSON: {exc.msg} at {exc.pos}") from None
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise QueueError('queues must be a JSON list of {"name", "weight", "max_slots"} objects')
    specs = []
    for entry in entries:
        unknown = set(entry) - {"name", "weight", "max_slots"}
        if unknown:
            raise QueueError(f"queue entry {entry!r} has unknown keys {sorted(unknown)}")
        name, weight, cap = entry.get("name"), entry.get("weight", 1), entry.get("max_slots")
        if not isinstance(name, str) or type(weight) is not int or not (cap is None or type(cap) is int):
            raise QueueError(f"queue entry {entry!r}: name must be a string, weight and max_slots whole numbers")
        specs.append(QueueSpec(name, weight, cap))
    return with_built_ins(specs)


def topology(queues: Sequence[QueueSpec]) -> tuple[tuple[TopicSpec, ...], tuple[SubscriptionSpec, ...]]:
    """Every topic and subscription a platform with ``queues`` needs: the contract's and each desk queue's."""
    desks = [queue for queue in queues if queue.subscription_spec() not in SUBSCRIPTIONS]
    return ((*TOPICS, *(TopicSpec(queue.topic) for queue in desks)),
            (*SUBSCRIPTIONS, *(queue.subscription_spec() for queue in desks)))
