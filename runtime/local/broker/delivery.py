"""One subscription's messages: leases and ack deadlines, redelivery with backoff, dead-lettering,
retention and seek.

Every method runs with the broker lock held; the queue never takes the lock itself. Every change that
may let a waiting Pull or StreamingPull go on calls the queue's wake-ups (runtime.local.broker.waiting).
Time-driven transitions (a lease expiring, a backoff ending, a message ageing out) happen in
:meth:`SubscriptionQueue.sweep`, which the broker's sweeper thread calls when
:meth:`SubscriptionQueue.next_due` says something is due.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from runtime.local.broker import proto
from runtime.local.broker.clock import Clock
from runtime.local.broker.journal import Journal, StoredMessage
from runtime.local.broker.ordering import KeyOrder
from runtime.local.broker.snapshots import Retained

# What an entry holds once its subscription is done with it: no payload (shared, never changed).
_RELEASED: Final = proto.PubsubMessage()


class EntryState(enum.Enum):
    """Where a message is in its life on one subscription."""

    READY = "ready"  # deliverable now
    DELAYED = "delayed"  # waiting out a retry backoff
    PARKED = "parked"  # waiting behind an earlier message of its ordering key (runtime.local.broker.ordering)
    LEASED = "leased"  # delivered, ack deadline running
    ACKED = "acked"  # acknowledged; kept only with retain_acked_messages
    GONE = "gone"  # dead-lettered, expired or deleted


@dataclass(eq=False)
class LeaseOwner:
    """What one streaming pull currently holds, for its flow control."""

    messages: int = 0
    bytes: int = 0


@dataclass(eq=False)
class Entry:
    """One published message as one subscription sees it."""

    message: proto.PubsubMessage
    published_wall: float
    published_mono: float
    size: int
    state: EntryState = EntryState.READY
    # Bumped on every state change so references parked in the ready deque or a heap go stale.
    epoch: int = 0
    delivery_attempt: int = 0
    ack_id: str = ""
    lease_deadline: float = 0.0
    owner: LeaseOwner | None = None


@dataclass(frozen=True)
class DeliveryPolicy:
    """The subscription settings that drive delivery, in protocol seconds (before time scaling)."""

    ack_deadline_s: int
    retention_s: float
    retain_acked: bool = False
    dead_letter_topic: str | None = None
    max_delivery_attempts: int | None = None
    min_backoff_s: float | None = None
    max_backoff_s: float | None = None
    ordered: bool = False  # enable_message_ordering: one message per ordering key at a time, in order

    def backoff_s(self, failed_attempts: int) -> float:
        """Delay before redelivery after ``failed_attempts`` failures: doubling from the minimum, capped at
        the maximum; none without a retry policy (the service then redelivers at once)."""
        if self.min_backoff_s is None:
            return 0.0
        delay = self.min_backoff_s * 2 ** max(failed_attempts - 1, 0)
        return min(delay, self.max_backoff_s) if self.max_backoff_s is not None else delay


@dataclass(frozen=True)
class DeadLetter:
    """A message that used up its delivery attempts on subscription ``source``, to be published on ``topic``."""

    source: str
    topic: str
    message: proto.PubsubMessage
    delivery_attempt: int


@dataclass(frozen=True)
class QueueStats:
    """Emulator-only counters for one subscription."""

    undelivered: int  # ready or waiting out a backoff: the backlog
    outstanding: int  # delivered and not yet acked (leased)
    dead_lettered: int  # forwarded to the dead-letter topic since creation
    acked_retained: int  # acked but kept because retain_acked_messages is set
    # Publish time of the oldest message not acked yet; a gauge for monitoring, left out of equality.
    oldest_unacked_wall: float | None = field(default=None, compare=False)
    held_bytes: int = field(default=0, compare=False)  # see SubscriptionQueue.held_bytes


@dataclass(eq=False)
class SubscriptionQueue:
    """The message state of one subscription."""

    name: str
    policy: DeliveryPolicy
    clock: Clock
    lock: threading.Lock
    # Where changes that must survive a restart are recorded (runtime.local.broker.journal); a no-op in memory.
    journal: Journal = field(default_factory=Journal)
    closed: bool = field(default=False, init=False)
    detached: bool = field(default=False, init=False)  # DetachSubscription: no messages, pulls refused
    dead_lettered: int = field(default=0, init=False)
    # Called on every change, lock held: the waiting RPCs of this subscription (see runtime.local.broker.waiting).
    wakeups: set[Callable[[], None]] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        self._log: OrderedDict[str, Entry] = OrderedDict()  # by message id, in publish order
        self._ready: deque[tuple[Entry, int]] = deque()
        self._delayed: list[tuple[float, int, Entry, int]] = []
        self._leases: list[tuple[float, int, Entry, str]] = []
        self._by_ack_id: dict[str, Entry] = {}
        self._seq = itertools.count()
        self._order: KeyOrder[Entry] = KeyOrder(
            lambda e: e.message.ordering_key if self.policy.ordered else "", lambda e: e.state is EntryState.GONE)
        # Ack ids are unique across subscriptions so one sent to the wrong subscription matches nothing.
        self._ack_prefix = f"{id(self):x}"

    # --- publishing and delivery --------------------------------------------------------------------

    def enqueue(self, message: proto.PubsubMessage, published_wall: float, published_mono: float) -> None:
        """Add a freshly published message and wake the pullers."""
        self._admit(self._add(message, published_wall, published_mono))
        self.changed()

    def _add(self, message: proto.PubsubMessage, published_wall: float, published_mono: float) -> Entry:
        entry = Entry(message, published_wall, published_mono, size=message.ByteSize())
        self._log[message.message_id] = entry
        self.journal.add_entry(self.name, message, published_wall)
        return entry

    def restore(self, stored: Iterable[StoredMessage]) -> None:
        """Take back the messages a restarted broker read from disk, in publish order: unacknowledged ones
        are deliverable at once (leases and backoffs are not kept), acknowledged ones stay retained."""
        for kept in stored:
            published_mono = self.clock.monotonic_at(kept.published_wall)
            entry = Entry(kept.message, kept.published_wall, published_mono, size=kept.message.ByteSize(),
                          delivery_attempt=kept.attempt)
            self._log[kept.message.message_id] = entry
            if kept.acked:
                self._set_state(entry, EntryState.ACKED)
            else:
                self._admit(entry)
        self.changed()

    def has_ready(self) -> bool:
        """Whether a message can be delivered now (drops stale references at the head)."""
        while self._ready and self._ready[0][0].epoch != self._ready[0][1]:
            self._ready.popleft()
        return bool(self._ready)

    def take(
        self, max_messages: int, deadline_s: int, owner: LeaseOwner | None = None, max_bytes: int = 0
    ) -> list[proto.ReceivedMessage]:
        """Lease up to ``max_messages`` ready messages (and about ``max_bytes``, at least one) for
        ``deadline_s`` protocol seconds; ``owner`` counts them for a stream's flow control."""
        now = self.clock.monotonic()
        taken: list[proto.ReceivedMessage] = []
        size = 0
        while len(taken) < max_messages and self.has_ready():
            entry = self._ready[0][0]
            if taken and max_bytes and size + entry.size > max_bytes:
                break
            self._ready.popleft()
            size += entry.size
            taken.append(self._lease(entry, now, deadline_s, owner))
        return taken

    def _lease(self, entry: Entry, now: float, deadline_s: int, owner: LeaseOwner | None) -> proto.ReceivedMessage:
        self._set_state(entry, EntryState.LEASED)
        entry.delivery_attempt += 1
        self.journal.attempted(self.name, entry.message.message_id, entry.delivery_attempt)
        self._by_ack_id.pop(entry.ack_id, None)
        entry.ack_id = f"{self._ack_prefix}-{next(self._seq)}"
        self._by_ack_id[entry.ack_id] = entry
        entry.lease_deadline = now + self.clock.lease_span(deadline_s)
        heapq.heappush(self._leases, (entry.lease_deadline, next(self._seq), entry, entry.ack_id))
        entry.owner = owner
        if owner is not None:
            owner.messages += 1
            owner.bytes += entry.size
        received = proto.ReceivedMessage(ack_id=entry.ack_id, message=entry.message)
        if self.policy.max_delivery_attempts is not None:
            # The service reports attempts only on subscriptions with a dead-letter policy.
            received.delivery_attempt = entry.delivery_attempt
        return received

    # --- acks and deadlines -------------------------------------------------------------------------

    def ack(self, ack_ids: Iterable[str]) -> None:
        """Acknowledge; an ack id of a superseded delivery, or an unknown one, is ignored as the service does."""
        for ack_id in ack_ids:
            entry = self._by_ack_id.pop(ack_id, None)
            if entry is None or entry.state in (EntryState.ACKED, EntryState.GONE):
                continue
            self._release(entry)
            self._finish(entry)
            if self.policy.retain_acked:
                self._mark_acked(entry)
            else:
                self._forget(entry)
        self.changed()

    def modify(self, ack_ids: Iterable[str], deadline_s: int) -> list[DeadLetter]:
        """Set the remaining ack deadline of leased messages; 0 nacks them. Returns messages to dead-letter."""
        now = self.clock.monotonic()
        dead: list[DeadLetter] = []
        for ack_id in ack_ids:
            entry = self._by_ack_id.get(ack_id)
            if entry is None or entry.state is not EntryState.LEASED or entry.ack_id != ack_id:
                continue
            if deadline_s == 0:
                dead.extend(self._fail(entry, now))
                continue
            deadline = now + self.clock.lease_span(deadline_s)
            if deadline < entry.lease_deadline:
                # Shortened: file the earlier deadline (the later one goes stale, since sweep checks the
                # entry's own deadline). Extended: the filed deadline pops early and sweep re-files it.
                heapq.heappush(self._leases, (deadline, next(self._seq), entry, ack_id))
            entry.lease_deadline = deadline
        self.changed()
        return dead

    def _fail(self, entry: Entry, now: float) -> list[DeadLetter]:
        """A delivery ended without an ack (nack or expiry): dead-letter, back off, or redeliver."""
        self._release(entry)
        limit = self.policy.max_delivery_attempts
        if limit is not None and entry.delivery_attempt >= limit and self.policy.dead_letter_topic:
            dead = DeadLetter(self.name, self.policy.dead_letter_topic, entry.message, entry.delivery_attempt)
            self._finish(entry)
            self._forget(entry)
            self.dead_lettered += 1
            self.journal.dead_lettered(self.name, self.dead_lettered)
            return [dead]
        delay = self.clock.span(self.policy.backoff_s(entry.delivery_attempt))
        if delay <= 0:
            self._make_ready(entry)
        else:
            self._set_state(entry, EntryState.DELAYED)
            heapq.heappush(self._delayed, (now + delay, next(self._seq), entry, entry.epoch))
        return []

    # --- time ---------------------------------------------------------------------------------------

    def sweep(self, now: float) -> list[DeadLetter]:
        """Apply everything due by ``now``: expired leases, ended backoffs, messages past retention."""
        dead: list[DeadLetter] = []
        while self._leases and self._leases[0][0] <= now:
            _, _, entry, ack_id = heapq.heappop(self._leases)
            if entry.state is not EntryState.LEASED or entry.ack_id != ack_id:
                continue
            if entry.lease_deadline > now:  # extended by a modack since it was filed
                heapq.heappush(self._leases, (entry.lease_deadline, next(self._seq), entry, ack_id))
            else:
                dead.extend(self._fail(entry, now))
        while self._delayed and self._delayed[0][0] <= now:
            _, _, entry, epoch = heapq.heappop(self._delayed)
            if entry.epoch == epoch:
                self._make_ready(entry)
        retention = self.clock.span(self.policy.retention_s)
        while self._log:
            oldest = next(iter(self._log.values()))
            if oldest.published_mono + retention > now:
                break
            self._release(oldest)
            self._finish(oldest)
            self._forget(oldest)
        self.changed()
        return dead

    def next_due(self) -> float | None:
        """The monotonic time of the next time-driven transition (possibly early, never late)."""
        candidates = [heap[0][0] for heap in (self._leases, self._delayed) if heap]
        if self._log:
            oldest = next(iter(self._log.values()))
            candidates.append(oldest.published_mono + self.clock.span(self.policy.retention_s))
        return min(candidates, default=None)

    # --- seek, settings, shutdown -------------------------------------------------------------------

    def seek_to_time(self, wall_time: float, replay: Iterable[Retained] = ()) -> None:
        """Mark messages published before ``wall_time`` acked and every later retained one unacked; add
        ``replay`` (what the topic retained from then on) where this subscription no longer has it."""
        for entry in list(self._log.values()):
            self._release(entry)
            self._by_ack_id.pop(entry.ack_id, None)
            if entry.published_wall >= wall_time:
                self._make_ready(entry)
            elif self.policy.retain_acked:
                self._mark_acked(entry)
            else:
                self._forget(entry)
        for retained in replay:
            if retained.message.message_id not in self._log:
                self._make_ready(self._add(retained.message, retained.published_wall, retained.published_mono))
        self._in_publish_order()
        self._reorder()
        self.changed()

    def unacked(self) -> list[Retained]:
        """The messages not acknowledged yet (ready, waiting out a backoff, or leased): a snapshot's content."""
        return [Retained(e.message, e.published_wall, e.published_mono) for e in self._log.values()
                if e.state not in (EntryState.ACKED, EntryState.GONE)]

    def seek_to_snapshot(self, messages: Iterable[Retained]) -> None:
        """Make exactly a snapshot's messages unacked; every other one acked (kept with retain_acked). The
        caller passes only the messages the subscription's filter lets through."""
        wanted = {r.message.message_id: r for r in messages}
        for entry in list(self._log.values()):
            self._release(entry)
            self._by_ack_id.pop(entry.ack_id, None)
            if wanted.pop(entry.message.message_id, None) is not None:
                self._make_ready(entry)
            elif self.policy.retain_acked:
                self._mark_acked(entry)
            else:
                self._forget(entry)
        for retained in wanted.values():  # acked and dropped here since, but the snapshot kept them
            self._make_ready(self._add(retained.message, retained.published_wall, retained.published_mono))
        self._in_publish_order()
        self._reorder()
        self.changed()

    def update_policy(self, policy: DeliveryPolicy) -> None:
        """Apply changed subscription settings to future deliveries and the next sweep."""
        self.policy = policy
        if not policy.retain_acked:
            for entry in [e for e in self._log.values() if e.state is EntryState.ACKED]:
                self._forget(entry)
        self.changed()

    def detach(self) -> None:
        """The subscription was detached from its topic: drop its backlog; waiting pulls end."""
        self._drop_all()
        self.detached = True
        self.changed()

    def close(self) -> None:
        """The subscription is gone: drop everything and wake every waiter so it can leave."""
        self._drop_all()
        self.closed = True
        self.changed()

    def _drop_all(self) -> None:
        for entry in list(self._log.values()):
            self._release(entry)
            self._forget(entry)
        self._order.reset()

    def stats(self) -> QueueStats:
        """Counts by state (a scan: this serves an admin view, not the delivery path)."""
        counts = dict.fromkeys(EntryState, 0)
        unacked = []
        for entry in self._log.values():
            counts[entry.state] += 1
            if entry.state is not EntryState.ACKED:
                unacked.append(entry.published_wall)
        return QueueStats(
            undelivered=counts[EntryState.READY] + counts[EntryState.DELAYED] + counts[EntryState.PARKED],
            outstanding=counts[EntryState.LEASED],
            dead_lettered=self.dead_lettered,
            acked_retained=counts[EntryState.ACKED],
            oldest_unacked_wall=min(unacked, default=None),
            held_bytes=self.held_bytes(),
        )

    def changed(self) -> None:
        """Wake everything waiting on this subscription, so it checks again."""
        for wakeup in self.wakeups:
            wakeup()

    # --- transitions --------------------------------------------------------------------------------

    def _set_state(self, entry: Entry, state: EntryState) -> None:
        entry.state = state
        entry.epoch += 1

    def _admit(self, entry: Entry) -> None:
        """Make a new (or replayed) message deliverable, unless it waits behind an earlier one of its key."""
        if self._order.admit(entry):
            self._make_ready(entry)
        else:
            self._set_state(entry, EntryState.PARKED)

    def _finish(self, entry: Entry) -> None:
        """``entry`` will not be delivered again: the next message of its ordering key may go."""
        following = self._order.finish(entry)
        if following is not None:
            self._make_ready(following)

    def _in_publish_order(self) -> None:
        """After a seek added messages back: put them in their publish place, not after the rest, so an
        ordering key restarts from its oldest. Publish time orders them; the message id (the broker
        assigns ascending numbers) settles a tie, and the sort is stable for ids that are not numbers."""
        def publish_order(item: tuple[str, Entry]) -> tuple[float, int]:
            message_id, entry = item
            return entry.published_mono, int(message_id) if message_id.isdigit() else 0

        self._log = OrderedDict(sorted(self._log.items(), key=publish_order))

    def _reorder(self) -> None:
        """After a seek: re-admit the ready messages in publish order, so each key starts from its oldest."""
        self._order.reset()
        for entry in self._log.values():
            if entry.state is EntryState.READY:
                self._admit(entry)

    def _make_ready(self, entry: Entry) -> None:
        if entry.state is EntryState.ACKED:  # a seek brought it back
            self.journal.acked(self.name, entry.message.message_id, False)
        self._set_state(entry, EntryState.READY)
        self._ready.append((entry, entry.epoch))

    def _release(self, entry: Entry) -> None:
        """End a lease's claim on its stream's flow-control budget."""
        if entry.owner is not None:
            entry.owner.messages -= 1
            entry.owner.bytes -= entry.size
            entry.owner = None

    def _mark_acked(self, entry: Entry) -> None:
        """Acknowledged, and kept because the subscription retains acked messages."""
        if entry.state is not EntryState.ACKED:
            self.journal.acked(self.name, entry.message.message_id, True)
        self._set_state(entry, EntryState.ACKED)

    def _forget(self, entry: Entry) -> None:
        """The subscription is done with ``entry`` (acked, dead-lettered, expired, dropped): let its message go.

        The ready deque and the lease and backoff heaps drop stale references only when they reach them (a lease
        heap holds an acked message until its deadline, up to 600 s); the entry keeps no payload meanwhile.
        """
        if entry.state is not EntryState.GONE:
            self.journal.remove_entry(self.name, entry.message.message_id)
        self._set_state(entry, EntryState.GONE)
        self._by_ack_id.pop(entry.ack_id, None)
        self._log.pop(entry.message.message_id, None)
        entry.message, entry.size = _RELEASED, 0

    def held_bytes(self) -> int:
        """Bytes of the messages this queue keeps alive: its log, and whatever its deque and heaps still point to
        (the emulator's own accounting of what acknowledged or dropped messages still cost)."""
        entries = {id(e): e for e in self._log.values()}
        entries |= {id(item[0]): item[0] for item in self._ready}
        entries |= {id(item[2]): item[2] for heap in (self._delayed, self._leases) for item in heap}
        return sum(entry.size for entry in entries.values())  # the message's ByteSize, 0 once released
