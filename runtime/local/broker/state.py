"""The broker: topics, subscriptions and publishing, behind one lock.

The gRPC servicers translate requests into calls on :class:`Broker`; the broker owns every topic and
subscription, fans published messages out to the subscriptions that existed at publish time, and
forwards dead letters. One lock guards it all: this is a development broker, and one lock keeps every
transition (including dead-lettering across two subscriptions) atomic and easy to reason about.

With a :class:`~runtime.local.broker.journal.Journal` on a file, every change is also recorded there, in the
order it was made under the lock, and a new broker on the same file starts from what it holds. The RPC
layer calls :meth:`Broker.flush` before it answers, so whatever a client was told is done is on disk.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from google.protobuf import field_mask_pb2

from runtime.local.broker import filters, limits, names, policy, proto
from runtime.local.broker.clock import Clock
from runtime.local.broker.deadletter import dead_letter_message
from runtime.local.broker.delivery import DeadLetter, LeaseOwner, QueueStats, SubscriptionQueue
from runtime.local.broker.errors import (
    already_exists,
    detached,
    failed_precondition,
    invalid_argument,
    not_found,
    shutting_down,
)
from runtime.local.broker.expiry import Expiry
from runtime.local.broker.journal import Journal, Loaded, StoredMessage
from runtime.local.broker.snapshots import UPDATABLE_SNAPSHOT_FIELDS, Retained, Snapshot
from runtime.local.broker.stats import EmulatorStats, SubscriptionStats
from runtime.local.broker.sweeper import Sweeper
from runtime.local.broker.topic_retention import TopicLog

log = logging.getLogger(__name__)
_T = TypeVar("_T")

DEFAULT_PAGE_SIZE = 100


@dataclass(eq=False)
class _Subscription:
    config: proto.Subscription
    queue: SubscriptionQueue
    matches: filters.Predicate | None = None  # the subscription's filter; None: every message

    def wants(self, message: proto.PubsubMessage) -> bool:
        """Whether a message published to the topic reaches this subscription (others are acked for it)."""
        return not self.config.detached and (self.matches is None or self.matches(message.attributes))


class Broker:
    """All topics and subscriptions of one emulator. Thread-safe."""

    def __init__(self, clock: Clock | None = None, journal: Journal | None = None) -> None:
        """A broker on ``clock``; with a durable ``journal`` it starts from the state kept there."""
        self.clock = clock or Clock()
        self._journal = journal or Journal()
        self.lock = threading.Lock()
        self._topics: dict[str, proto.Topic] = {}
        self._published: dict[str, int] = {}
        self._subscriptions: dict[str, _Subscription] = {}
        self._snapshots: dict[str, Snapshot] = {}
        self._topic_logs: dict[str, TopicLog] = {}  # topics with message retention: what they keep
        self._next_message_id = 1  # ids are never reused, across restarts too
        self._expiry = Expiry(self.clock)
        self._sweeper = Sweeper(self.lock, self.clock, self._queues, self._forward_dead_letters,
                                self._expire_subscriptions)
        try:
            self._restore(self._journal.load())
        except BaseException:
            self._journal.close()
            raise
        self._journal.start()
        self._sweeper.start()
        self.closed = False

    def close(self) -> None:
        """Stop the sweeper, release every waiting puller and stream, commit what is left and close the file.

        What the subscriptions hold stays on disk: closing is not deleting.
        """
        with self.lock:
            self.closed = True
            for sub in self._subscriptions.values():
                sub.queue.journal = Journal()  # dropping the in-memory queue must not delete the stored one
                sub.queue.close()
        self._sweeper.stop()
        self._journal.close()

    def flush(self) -> None:
        """Return once every change made so far is on disk (at once for the in-memory broker); call it
        without the lock, before answering a request that changed something."""
        self._journal.flush()

    def _restore(self, loaded: Loaded) -> None:
        """Start from what a journal kept: topics, subscriptions with their messages, snapshots."""
        self._next_message_id = loaded.next_message_id
        for topic, published in loaded.topics:
            self._topics[topic.name] = topic
            self._published[topic.name] = published
            self._set_topic_retention(topic)
            for kept in loaded.topic_messages.get(topic.name, ()) if topic.name in self._topic_logs else ():
                self._topic_logs[topic.name].add(self._retained(kept))
        for config, dead_lettered in loaded.subscriptions:
            matches = filters.compile_filter(config.filter) if config.filter else None
            queue = self._new_queue(config)
            queue.dead_lettered = dead_lettered
            if config.detached:
                queue.detach()
            queue.restore(loaded.entries.get(config.name, ()))
            self._subscriptions[config.name] = _Subscription(config, queue, matches)
            self._expiry.track(config)
        for config, messages in loaded.snapshots:
            self._snapshots[config.name] = Snapshot(
                config, OrderedDict((m.message.message_id, self._retained(m)) for m in messages))
        if loaded.topics or loaded.subscriptions:
            log.info("broker state restored", extra={
                "topics": len(loaded.topics), "subscriptions": len(loaded.subscriptions),
                "snapshots": len(loaded.snapshots), "messages": sum(map(len, loaded.entries.values()))})

    def _retained(self, kept: StoredMessage) -> Retained:
        """A message read back from disk, its retention counted from its real publish time."""
        return Retained(kept.message, kept.published_wall, self.clock.monotonic_at(kept.published_wall))

    def _new_queue(self, config: proto.Subscription) -> SubscriptionQueue:
        return SubscriptionQueue(config.name, policy.delivery_policy(config), self.clock, self.lock, self._journal)

    # --- topics -------------------------------------------------------------------------------------

    def create_topic(self, topic: proto.Topic) -> proto.Topic:
        """Create ``topic``; ALREADY_EXISTS if its name is taken."""
        name = names.parse(topic.name, "topics")
        policy.refuse_unsupported_topic(topic)
        policy.topic_retention_s(topic)
        with self.lock:
            if topic.name in self._topics:
                raise already_exists(name.id)
            stored = proto.Topic()
            stored.CopyFrom(topic)
            self._topics[topic.name] = stored
            self._published[topic.name] = 0
            self._set_topic_retention(stored)
            self._journal.save_topic(stored)
        log.info("topic created", extra={"topic": topic.name})
        return stored

    def get_topic(self, topic_name: str) -> proto.Topic:
        """The topic named ``topic_name``."""
        with self.lock:
            return self._topic(topic_name)

    def update_topic(self, topic: proto.Topic, mask: field_mask_pb2.FieldMask) -> proto.Topic:
        """Change the fields of ``topic`` named in ``mask``."""
        policy.check_update_mask(list(mask.paths), policy.UPDATABLE_TOPIC_FIELDS, "Topic")
        with self.lock:
            stored = self._topic(topic.name)
            updated = proto.Topic()
            updated.CopyFrom(stored)
            mask.MergeMessage(topic, updated, replace_message_field=True, replace_repeated_field=True)
            policy.refuse_unsupported_topic(updated)
            policy.topic_retention_s(updated)
            stored.CopyFrom(updated)
            self._set_topic_retention(stored)
            self._journal.save_topic(stored)
            return stored

    def delete_topic(self, topic_name: str) -> None:
        """Delete a topic; its subscriptions stay, detached from it, as on the real service."""
        with self.lock:
            self._topic(topic_name)
            del self._topics[topic_name]
            del self._published[topic_name]
            self._topic_logs.pop(topic_name, None)
            self._journal.delete_topic(topic_name)
            for sub in self._subscriptions.values():
                if sub.config.topic == topic_name:
                    sub.config.topic = names.DELETED_TOPIC
                    self._journal.save_subscription(sub.config)
        log.info("topic deleted", extra={"topic": topic_name})

    def list_topics(self, project: str, page_size: int, page_token: str) -> tuple[list[proto.Topic], str]:
        """One page of the project's topics and the token of the next page ("" at the end)."""
        with self.lock:
            topics = _in_project(self._topics, project, "topics")
        return _page(topics, page_size, page_token)

    def list_topic_subscriptions(self, topic_name: str, page_size: int, page_token: str) -> tuple[list[str], str]:
        """One page of the names of the subscriptions attached to a topic."""
        with self.lock:
            self._topic(topic_name)
            attached = sorted(n for n, s in self._subscriptions.items() if s.config.topic == topic_name)
        return _page(attached, page_size, page_token)

    def publish(self, request: proto.PublishRequest) -> list[str]:
        """Publish to every subscription the topic has now; return the new message ids."""
        limits.check_publish(request)
        with self.lock:
            self._topic(request.topic)
            ids = [self._publish_locked(request.topic, message) for message in request.messages]
            self._record_published(request.topic)
            return ids

    def _publish_locked(self, topic_name: str, message: proto.PubsubMessage) -> str:
        stored = proto.PubsubMessage()
        stored.CopyFrom(message)
        stored.message_id = str(self._next_message_id)
        self._next_message_id += 1
        wall, mono = self.clock.wall(), self.clock.monotonic()
        stored.publish_time.FromNanoseconds(int(wall * 1e9))
        self._published[topic_name] += 1
        if topic_name in self._topic_logs:
            self._expire(topic_name, self._topic_logs[topic_name]).add(Retained(stored, wall, mono))
            self._journal.retain(topic_name, stored, wall)
        for snapshot in self._snapshots.values():
            if snapshot.config.topic == topic_name:
                snapshot.add(Retained(stored, wall, mono))
                self._journal.snapshot_message(snapshot.config.name, stored, wall)
        # Messages go only to subscriptions that exist now; with none, the message is dropped.
        for sub in self._subscriptions.values():
            if sub.config.topic == topic_name and sub.wants(stored):
                sub.queue.enqueue(stored, wall, mono)
                self._sweeper.poke(sub.queue.next_due())
        return stored.message_id

    # --- subscriptions ------------------------------------------------------------------------------

    def create_subscription(self, subscription: proto.Subscription) -> proto.Subscription:
        """Create a subscription; it receives only messages published from now on."""
        name = names.parse(subscription.name, "subscriptions")
        topic_id = names.parse(subscription.topic, "topics").id
        stored = proto.Subscription()
        stored.CopyFrom(subscription)
        policy.normalize(stored)
        matches = filters.compile_filter(stored.filter) if stored.filter else None
        with self.lock:
            if stored.name in self._subscriptions:
                raise already_exists(name.id)
            if stored.topic not in self._topics:
                raise not_found(topic_id)
            self._check_dead_letter_topic(stored)
            self._subscriptions[stored.name] = _Subscription(stored, self._new_queue(stored), matches)
            self._journal.save_subscription(stored)
            self._sweeper.poke(self._expiry.track(stored))
        log.info("subscription created", extra={"subscription": stored.name, "topic": stored.topic})
        return stored

    def get_subscription(self, subscription_name: str) -> proto.Subscription:
        """The subscription named ``subscription_name``."""
        with self.lock:
            return self._subscription(subscription_name).config

    def update_subscription(
        self, subscription: proto.Subscription, mask: field_mask_pb2.FieldMask
    ) -> proto.Subscription:
        """Change the fields named in ``mask``; delivery follows the new settings from now on."""
        policy.check_update_mask(list(mask.paths), policy.UPDATABLE_SUBSCRIPTION_FIELDS, "Subscription")
        with self.lock:
            current = self._subscription(subscription.name)
            updated = proto.Subscription()
            updated.CopyFrom(current.config)
            mask.MergeMessage(subscription, updated, replace_message_field=True, replace_repeated_field=True)
            policy.normalize(updated)
            self._check_dead_letter_topic(updated)
            current.config = updated
            self._journal.save_subscription(updated)
            current.queue.update_policy(policy.delivery_policy(updated))
            self._sweeper.poke(current.queue.next_due())
            if "expiration_policy" in mask.paths:
                self._sweeper.poke(self._expiry.track(updated))
            return updated

    def delete_subscription(self, subscription_name: str) -> None:
        """Delete a subscription and its messages; open streams on it end with NOT_FOUND."""
        with self.lock:
            self._delete_locked(subscription_name)
        log.info("subscription deleted", extra={"subscription": subscription_name})

    def _delete_locked(self, subscription_name: str) -> None:
        sub = self._subscription(subscription_name)
        del self._subscriptions[subscription_name]
        sub.queue.close()
        self._expiry.forget(subscription_name)
        self._journal.delete_subscription(subscription_name)

    def _expire_subscriptions(self, now: float) -> float | None:
        """Delete the subscriptions unused past their ttl (the sweeper, lock held); returns when the next may be."""
        expired, upcoming = self._expiry.due(now, lambda name: bool(self._subscriptions[name].queue.wakeups))
        for name in expired:
            self._delete_locked(name)
            log.info("subscription expired", extra={"subscription": name})
        return upcoming

    def detach_subscription(self, subscription_name: str) -> None:
        """Detach a subscription from its topic: its backlog is dropped, it gets no more messages, and
        Pull and StreamingPull on it fail with FAILED_PRECONDITION."""
        with self.lock:
            sub = self._subscription(subscription_name)
            sub.config.detached = True
            sub.queue.detach()
            self._journal.save_subscription(sub.config)
        log.info("subscription detached", extra={"subscription": subscription_name})

    def list_subscriptions(self, project: str, page_size: int, page_token: str) -> tuple[list[proto.Subscription], str]:
        """One page of the project's subscriptions."""
        with self.lock:
            subs = [s.config for s in _in_project(self._subscriptions, project, "subscriptions")]
        return _page(subs, page_size, page_token)

    def watch(self, subscription_name: str, wakeup: Callable[[], None]) -> SubscriptionQueue:
        """Call ``wakeup`` on every change of a subscription from now on (a waiting Pull or stream); returns
        the subscription's queue, to pass to :meth:`unwatch`."""
        with self.lock:
            queue = self._subscription(subscription_name).queue
            queue.wakeups.add(wakeup)
            self._expiry.used(subscription_name)
            return queue

    def unwatch(self, queue: SubscriptionQueue, wakeup: Callable[[], None]) -> None:
        """Stop calling ``wakeup``."""
        with self.lock:
            queue.wakeups.discard(wakeup)
            self._expiry.used(queue.name)  # its inactivity counts from the end of the Pull or stream

    # --- delivery -----------------------------------------------------------------------------------

    def pull(self, subscription_name: str, max_messages: int) -> list[proto.ReceivedMessage]:
        """Lease up to ``max_messages`` of the messages ready now (possibly none); the caller waits."""
        if max_messages <= 0:
            raise invalid_argument("max_messages must be greater than 0.")
        with self.lock:
            queue = self._subscription(subscription_name).queue
            self._expiry.used(subscription_name)
            if self.closed:
                raise shutting_down()
            if queue.detached:
                raise detached(subscription_name)
            count = min(max_messages, limits.MAX_MESSAGES_PER_CALL)
            return self.lease_locked(queue, count, queue.policy.ack_deadline_s)

    def lease_locked(
        self, queue: SubscriptionQueue, max_messages: int, deadline_s: int, owner: LeaseOwner | None = None,
        max_bytes: int = 0,
    ) -> list[proto.ReceivedMessage]:
        """Lease ready messages from ``queue``; call with the lock held (a stream checks its room under it)."""
        received = queue.take(max_messages, deadline_s, owner, max_bytes)
        if received:
            self._sweeper.poke(queue.next_due())
        return received

    def acknowledge(self, subscription_name: str, ack_ids: Iterable[str]) -> None:
        """Acknowledge messages of a subscription."""
        with self.lock:
            self._subscription(subscription_name).queue.ack(ack_ids)
            self._expiry.used(subscription_name)

    def modify_ack_deadline(self, subscription_name: str, ack_ids: Iterable[str], deadline_s: int) -> None:
        """Extend (or, with 0, end) the leases of messages."""
        policy.check_modify_deadline(deadline_s)
        with self.lock:
            queue = self._subscription(subscription_name).queue
            self._expiry.used(subscription_name)
            self._forward_dead_letters(queue.modify(ack_ids, deadline_s))
            self._sweeper.poke(queue.next_due())

    def seek_to_time(self, subscription_name: str, wall_time: float) -> None:
        """Replay retained messages published at or after ``wall_time``; ack the older ones. With topic
        retention, what the topic keeps from then on (that the filter passes) comes back too, messages
        published before the subscription existed included."""
        with self.lock:
            sub = self._subscription(subscription_name)
            self._expiry.used(subscription_name)
            log = self._topic_logs.get(sub.config.topic)
            replay = [r for r in self._expire(sub.config.topic, log).since(wall_time) if sub.wants(r.message)] \
                if log is not None else []
            sub.queue.seek_to_time(wall_time, replay)

    # --- snapshots ----------------------------------------------------------------------------------

    def create_snapshot(self, request: proto.CreateSnapshotRequest) -> proto.Snapshot:
        """Snapshot a subscription's unacked messages; the snapshot also keeps what its topic gets later."""
        name = names.parse(request.name, "snapshots")
        with self.lock:
            if request.name in self._snapshots:
                raise already_exists(name.id)
            sub = self._subscription(request.subscription)
            if sub.config.topic not in self._topics:
                raise failed_precondition("The subscription's topic was deleted; it cannot be snapshotted.")
            snapshot = Snapshot.take(request.name, sub.config.topic, dict(request.labels), sub.queue.unacked(),
                                     self.clock.wall())
            self._snapshots[request.name] = snapshot
            self._journal.save_snapshot(snapshot.config, ((r.message, r.published_wall)
                                                          for r in snapshot.messages.values()))
            return snapshot.config

    def get_snapshot(self, snapshot_name: str) -> proto.Snapshot:
        """The snapshot named ``snapshot_name``."""
        with self.lock:
            return self._snapshot(snapshot_name).config

    def update_snapshot(self, snapshot: proto.Snapshot, mask: field_mask_pb2.FieldMask) -> proto.Snapshot:
        """Change a snapshot's labels or expiry time."""
        policy.check_update_mask(list(mask.paths), UPDATABLE_SNAPSHOT_FIELDS, "Snapshot")
        with self.lock:
            stored = self._snapshot(snapshot.name).config
            mask.MergeMessage(snapshot, stored, replace_message_field=True, replace_repeated_field=True)
            self._journal.save_snapshot(stored, ())
            return stored

    def delete_snapshot(self, snapshot_name: str) -> None:
        """Delete a snapshot."""
        with self.lock:
            self._snapshot(snapshot_name)
            del self._snapshots[snapshot_name]
            self._journal.delete_snapshot(snapshot_name)

    def list_snapshots(self, project: str, page_size: int, page_token: str) -> tuple[list[proto.Snapshot], str]:
        """One page of the project's snapshots."""
        with self.lock:
            found = [s.config for s in _in_project(self._snapshots, project, "snapshots")]
        return _page(found, page_size, page_token)

    def seek_to_snapshot(self, subscription_name: str, snapshot_name: str) -> None:
        """Make the snapshot's messages the subscription's unacked ones; the topics must be the same."""
        with self.lock:
            sub = self._subscription(subscription_name)
            self._expiry.used(subscription_name)
            snapshot = self._snapshot(snapshot_name)
            if snapshot.config.topic != sub.config.topic:
                raise invalid_argument("The snapshot's topic and the subscription's topic must be the same.")
            # The snapshot holds its topic's messages; the subscription still gets only those its filter passes.
            sub.queue.seek_to_snapshot(r for r in snapshot.messages.values() if sub.wants(r.message))

    def stats(self) -> EmulatorStats:
        """A snapshot of the emulator-only counters."""
        with self.lock:
            per_sub = []
            for name, sub in sorted(self._subscriptions.items()):
                counts: QueueStats = sub.queue.stats()
                per_sub.append(SubscriptionStats(name=name, topic=sub.config.topic, undelivered=counts.undelivered,
                                                 outstanding=counts.outstanding, dead_lettered=counts.dead_lettered,
                                                 acked_retained=counts.acked_retained,
                                                 oldest_unacked_wall=counts.oldest_unacked_wall,
                                                 held_bytes=counts.held_bytes))
            return EmulatorStats(subscriptions=tuple(per_sub), published=dict(self._published))

    # --- internals (lock held) ----------------------------------------------------------------------

    def _topic(self, topic_name: str) -> proto.Topic:
        return _find(self._topics, topic_name, "topics")

    def _subscription(self, subscription_name: str) -> _Subscription:
        return _find(self._subscriptions, subscription_name, "subscriptions")

    def _snapshot(self, snapshot_name: str) -> Snapshot:
        return _find(self._snapshots, snapshot_name, "snapshots")

    def _check_dead_letter_topic(self, subscription: proto.Subscription) -> None:
        if subscription.HasField("dead_letter_policy"):
            dead_letter_topic = subscription.dead_letter_policy.dead_letter_topic
            if dead_letter_topic not in self._topics:
                raise not_found(names.parse(dead_letter_topic, "topics").id)

    def _set_topic_retention(self, topic: proto.Topic) -> None:
        """Start, resize or end the topic's retained log after its retention setting was set or changed."""
        retention_s = policy.topic_retention_s(topic)
        if retention_s is None:
            if self._topic_logs.pop(topic.name, None) is not None:
                self._journal.unretain(topic.name)
        elif topic.name in self._topic_logs:
            self._topic_logs[topic.name].retention_s = retention_s
        else:
            self._topic_logs[topic.name] = TopicLog(retention_s)

    def _expire(self, topic_name: str, log: TopicLog) -> TopicLog:
        """Drop what the topic kept past its retention (checked when it is read: nothing waits on it)."""
        for message in log.expire(self.clock):
            self._journal.unretain(topic_name, message.message_id)
        return log

    def _record_published(self, topic_name: str) -> None:
        """Journal the counters a publish moved (once per request, not per message)."""
        self._journal.next_message_id(self._next_message_id)
        self._journal.published(topic_name, self._published[topic_name])

    def _queues(self) -> list[SubscriptionQueue]:
        return [sub.queue for sub in self._subscriptions.values()]

    def _forward_dead_letters(self, dead_letters: list[DeadLetter]) -> None:
        for dead in dead_letters:
            if dead.topic not in self._topics:
                log.warning("dead-letter topic is gone; message dropped",
                            extra={"topic": dead.topic, "message_id": dead.message.message_id})
                continue
            message_id = self._publish_locked(dead.topic, dead_letter_message(dead))
            self._record_published(dead.topic)
            log.info("message dead-lettered", extra={
                "topic": dead.topic, "source_message_id": dead.message.message_id, "message_id": message_id,
                "delivery_attempt": dead.delivery_attempt})


def _in_project(table: Mapping[str, _T], project: str, collection: str) -> list[_T]:
    """The resources of ``collection`` in ``table`` that ``project`` holds, sorted by name (lock held)."""
    project_id = names.parse_project(project)
    return [value for name, value in sorted(table.items()) if names.parse(name, collection).project == project_id]


def _page(items: list, page_size: int, page_token: str) -> tuple[list, str]:
    """Cut one page out of a sorted listing; the token is the offset of the next page."""
    try:
        start = int(page_token) if page_token else 0
    except ValueError:
        raise invalid_argument(f"Invalid page token: {page_token!r}.") from None
    size = page_size if page_size > 0 else DEFAULT_PAGE_SIZE
    end = start + size
    return items[start:end], str(end) if end < len(items) else ""


def _find(table: Mapping[str, _T], full_name: str, collection: str) -> _T:
    """The resource ``full_name`` of ``collection`` (``topics``…): INVALID_ARGUMENT for a malformed name, as the
    service answers, then NOT_FOUND naming its id."""
    name = names.parse(full_name, collection)
    try:
        return table[full_name]
    except KeyError:
        raise not_found(name.id) from None
