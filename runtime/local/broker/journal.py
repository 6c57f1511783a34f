"""Durability: the broker's topics, subscriptions, snapshots and unacknowledged messages in a SQLite file,
so that stopping, restarting or killing the emulator loses nothing it acknowledged.

The broker records every change as it makes it (under its lock, so the record follows the order of the
changes); a writer thread of this module applies what has accumulated in one transaction and commits it.
An RPC that changed something answers only once its change is committed (:meth:`Journal.flush`), so a
publish the client saw acknowledged survives a crash. Requests that arrive together share a commit:
fsyncs are paid per batch of requests, never per message.

SQLite runs in WAL mode with ``synchronous=FULL``: every commit fsyncs the write-ahead log, so an
acknowledged publish survives a power cut or an OS crash as well as a killed process. (``NORMAL`` would
survive a killed process only; it was measured and its gain is small next to gRPC's own cost, see
docs/emulator.md.)

What is kept per subscription is each message not yet acknowledged (and, with ``retain_acked_messages``,
the acknowledged ones) with its delivery attempt count. Leases, ack ids and retry backoffs are not kept: a
restarted broker offers every unacknowledged message again at once, as it does after a lease expires.
Delivery attempts are recorded when a message is handed out but not waited for (a Pull or a stream
does not wait for a commit): the next answered RPC, or a few milliseconds, makes them durable.

Compaction: SQLite keeps the pages an acknowledged message leaves as free pages of the file, and a WAL file
as large as its largest burst (https://www.sqlite.org/lang_vacuum.html, https://www.sqlite.org/pragma.html
#pragma_journal_size_limit), so without it the file only ever grows (273 MB after a long chaos run, almost
all of it free). The writer thread looks at the file every ``COMPACT_CHECK_S`` after a change and at start:
when free pages are at least ``COMPACT_FREE_RATIO`` of a file of ``COMPACT_MIN_BYTES`` or more, it rewrites
the file (VACUUM: only live rows are copied, so it costs what is unacknowledged, not what was) and truncates
the WAL. RPCs that wait for a commit meanwhile wait for the rewrite too.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from runtime.local.broker import proto
from runtime.local.broker.background import ConditionThread
from runtime.local.broker.errors import storage_failed

log = logging.getLogger(__name__)

DATABASE_FILE: Final = "broker.sqlite3"
SCHEMA_VERSION: Final = 1
LOCK_WAIT_S: Final = 1.0  # how long opening waits for another broker to release the file before refusing
# Compaction: a file smaller than this is never rewritten (the space is not worth a pause of the writer).
COMPACT_MIN_BYTES: Final = 8 * 1024 * 1024
# Rewrite once at least this share of the file is free pages: the rewrite then at least halves the file.
COMPACT_FREE_RATIO: Final = 0.5
# How often (seconds) the writer looks at the file while it changes; a look is three PRAGMA reads.
COMPACT_CHECK_S: Final = 10.0
# SQLite truncates the WAL to at most this many bytes after each checkpoint (it keeps its largest size else).
WAL_LIMIT_BYTES: Final = 16 * 1024 * 1024
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS topics (
    name TEXT PRIMARY KEY, config BLOB NOT NULL, published INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS subscriptions (
    name TEXT PRIMARY KEY, config BLOB NOT NULL, dead_lettered INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS snapshots (name TEXT PRIMARY KEY, config BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS snapshot_messages (
    snapshot TEXT NOT NULL, message_id INTEGER NOT NULL, message BLOB NOT NULL, published_wall REAL NOT NULL,
    PRIMARY KEY (snapshot, message_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS topic_messages (
    topic TEXT NOT NULL, message_id INTEGER NOT NULL, message BLOB NOT NULL, published_wall REAL NOT NULL,
    PRIMARY KEY (topic, message_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS entries (
    subscription TEXT NOT NULL, message_id INTEGER NOT NULL, message BLOB NOT NULL, published_wall REAL NOT NULL,
    attempt INTEGER NOT NULL, acked INTEGER NOT NULL, PRIMARY KEY (subscription, message_id)) WITHOUT ROWID;
"""
_SAVE_TOPIC: Final = ("INSERT INTO topics (name, config) VALUES (?, ?) "
                      "ON CONFLICT (name) DO UPDATE SET config = excluded.config")
_SAVE_SUBSCRIPTION: Final = ("INSERT INTO subscriptions (name, config) VALUES (?, ?) "
                             "ON CONFLICT (name) DO UPDATE SET config = excluded.config")
_ADD_ENTRY: Final = ("INSERT OR REPLACE INTO entries (subscription, message_id, message, published_wall, attempt, "
                     "acked) VALUES (?, ?, ?, ?, ?, ?)")
_SET_ATTEMPT: Final = "UPDATE entries SET attempt = ? WHERE subscription = ? AND message_id = ?"
_SET_ACKED: Final = "UPDATE entries SET acked = ? WHERE subscription = ? AND message_id = ?"
_REMOVE_ENTRY: Final = "DELETE FROM entries WHERE subscription = ? AND message_id = ?"

Op = tuple[str, tuple[Any, ...]]


@dataclass
class StoredMessage:
    """One message as a subscription or a snapshot holds it on disk."""

    message: proto.PubsubMessage
    published_wall: float
    attempt: int = 0
    acked: bool = False


@dataclass
class Loaded:
    """Everything a broker restarts from."""

    next_message_id: int = 1
    topics: list[tuple[proto.Topic, int]] = field(default_factory=list)  # (config, published count)
    subscriptions: list[tuple[proto.Subscription, int]] = field(default_factory=list)  # (config, dead-lettered)
    snapshots: list[tuple[proto.Snapshot, list[StoredMessage]]] = field(default_factory=list)
    topic_messages: dict[str, list[StoredMessage]] = field(default_factory=dict)  # retained by topics
    entries: dict[str, list[StoredMessage]] = field(default_factory=dict)  # by subscription, in publish order


class Journal:
    """Records broker changes; without a path (the in-memory broker) every method does nothing."""

    def __init__(self, path: Path | None = None) -> None:
        """Open (creating if need be) the database at ``path``; None keeps nothing."""
        self.path = path
        self._cond = threading.Condition()
        self._pending: list[Op] = []
        self._appended = 0  # ops recorded so far
        self._durable = 0  # ops committed so far
        self._failure: str | None = None
        self._conn: sqlite3.Connection | None = None
        self._writer = ConditionThread(self._cond, "pubsub-emulator-journal", self._run)
        self._changed_since_look = False  # whether anything was written since the writer last looked at the size
        self.compactions = 0  # how many times the file was rewritten (tests, the log)
        if path is not None:
            self._conn = _open(path)

    @property
    def durable(self) -> bool:
        """Whether changes are kept on disk."""
        return self._conn is not None

    # --- loading and the writer ---------------------------------------------------------------------

    def load(self) -> Loaded:
        """Read back everything stored (call before :meth:`start`)."""
        loaded = Loaded()
        if self._conn is None:
            return loaded
        try:
            return _read(self._conn, loaded)
        except Exception as error:  # a corrupt row: name the file, never a bare traceback
            raise ValueError(f"{self.path}: the broker's data cannot be read back ({error}); move the file "
                             "aside to start with an empty broker") from error

    def start(self) -> None:
        """Compact a file an earlier run left mostly free, then start the writer thread (idempotent; nothing to
        do without a path)."""
        if self._conn is not None and not self._writer.started:
            self._compact_if_worth_it()
            self._writer.start()

    def close(self) -> None:
        """Commit what is left, stop the writer and close the file (idempotent)."""
        self._writer.stop()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def flush(self) -> None:
        """Return once every change recorded so far is committed; call without the broker's lock.

        Raises PubSubError (UNAVAILABLE) if the file cannot be written: the caller's change may be lost.
        """
        if self._conn is None and not self._writer.started:
            return
        with self._cond:
            wanted = self._appended
            while self._durable < wanted and self._failure is None:
                self._cond.wait()
            if self._durable < wanted:
                raise storage_failed(str(self.path), self._failure or "")

    def _record(self, op: Op) -> None:
        with self._cond:
            # A change racing the broker's shutdown: the writer is gone, nobody would wait it out.
            if self._writer.stopping:
                return
            self._pending.append(op)
            self._appended += 1
            self._cond.notify_all()

    def _run(self) -> None:
        looked_at = time.monotonic()
        while True:
            with self._cond:
                while not self._pending and not self._writer.stopping:
                    # After changes, wake to look at the file even if no more come (the last acks of a burst).
                    if not self._cond.wait(COMPACT_CHECK_S if self._changed_since_look else None):
                        break
                if not self._pending and self._writer.stopping:
                    return
                batch, self._pending = self._pending, []
                upto = self._appended
            if time.monotonic() - looked_at >= COMPACT_CHECK_S and self._changed_since_look:
                self._compact_if_worth_it()
                looked_at = time.monotonic()
            if not batch:
                continue
            try:
                self._write(batch)
                self._changed_since_look = True
            except sqlite3.Error as error:
                log.error("cannot write the broker's data file; changes from now on are not kept",
                          extra={"path": str(self.path), "error": str(error)})
                with self._cond:
                    self._failure = str(error)
                    self._cond.notify_all()
                return
            with self._cond:
                self._durable = upto
                self._cond.notify_all()

    def _compact_if_worth_it(self) -> bool:
        """Rewrite the file when enough of it is free pages (see the module's docstring); True if it did.

        Called by the writer thread (or before it starts), between transactions. A failure is logged and
        left: compaction only gives space back, and the next look tries again.
        """
        assert self._conn is not None
        self._changed_since_look = False
        try:
            page_size = self._conn.execute("PRAGMA page_size").fetchone()[0]
            pages = self._conn.execute("PRAGMA page_count").fetchone()[0]
            free = self._conn.execute("PRAGMA freelist_count").fetchone()[0]
            if pages * page_size < COMPACT_MIN_BYTES or free < COMPACT_FREE_RATIO * pages:
                return False
            self._conn.execute("VACUUM")
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            after = self._conn.execute("PRAGMA page_count").fetchone()[0]
        except sqlite3.Error as error:
            log.warning("could not compact the broker's data file", extra={"path": str(self.path), "error": str(error)})
            return False
        self.compactions += 1
        log.info("compacted the broker's data file", extra={
            "path": str(self.path), "bytes_before": pages * page_size, "bytes_after": after * page_size})
        return True

    def _write(self, batch: list[Op]) -> None:
        """One transaction: consecutive ops of the same statement go to SQLite together."""
        assert self._conn is not None
        with self._conn:
            start = 0
            while start < len(batch):
                sql = batch[start][0]
                end = start
                while end < len(batch) and batch[end][0] == sql:
                    end += 1
                self._conn.executemany(sql, [params for _, params in batch[start:end]])
                start = end

    # --- what the broker records --------------------------------------------------------------------

    def next_message_id(self, value: int) -> None:
        """The id the next published message gets (ids are never reused)."""
        if self._conn is not None:
            self._record(("INSERT OR REPLACE INTO meta (key, value) VALUES ('next_message_id', ?)", (value,)))

    def save_topic(self, topic: proto.Topic) -> None:
        """A topic was created or updated."""
        if self._conn is not None:
            self._record((_SAVE_TOPIC, (topic.name, topic.SerializeToString())))

    def published(self, topic_name: str, count: int) -> None:
        """The topic's count of published messages (the admin view's)."""
        if self._conn is not None:
            self._record(("UPDATE topics SET published = ? WHERE name = ?", (count, topic_name)))

    def delete_topic(self, topic_name: str) -> None:
        """A topic was deleted (with the messages it retained)."""
        if self._conn is not None:
            self._record(("DELETE FROM topic_messages WHERE topic = ?", (topic_name,)))
            self._record(("DELETE FROM topics WHERE name = ?", (topic_name,)))

    def retain(self, topic_name: str, message: proto.PubsubMessage, published_wall: float) -> None:
        """A topic with message retention keeps a message it got."""
        if self._conn is not None:
            self._record(("INSERT OR REPLACE INTO topic_messages (topic, message_id, message, published_wall) "
                          "VALUES (?, ?, ?, ?)",
                          (topic_name, int(message.message_id), message.SerializeToString(), published_wall)))

    def unretain(self, topic_name: str, message_id: str | None = None) -> None:
        """A topic stopped retaining a message (past its retention), or every message (None)."""
        if self._conn is None:
            return
        if message_id is None:
            self._record(("DELETE FROM topic_messages WHERE topic = ?", (topic_name,)))
        else:
            self._record(("DELETE FROM topic_messages WHERE topic = ? AND message_id = ?",
                          (topic_name, int(message_id))))

    def save_subscription(self, subscription: proto.Subscription) -> None:
        """A subscription was created or its settings changed."""
        if self._conn is not None:
            self._record((_SAVE_SUBSCRIPTION, (subscription.name, subscription.SerializeToString())))

    def dead_lettered(self, subscription_name: str, count: int) -> None:
        """The subscription's count of forwarded dead letters."""
        if self._conn is not None:
            self._record(("UPDATE subscriptions SET dead_lettered = ? WHERE name = ?", (count, subscription_name)))

    def delete_subscription(self, subscription_name: str) -> None:
        """A subscription and its messages are gone."""
        if self._conn is not None:
            self._record(("DELETE FROM entries WHERE subscription = ?", (subscription_name,)))
            self._record(("DELETE FROM subscriptions WHERE name = ?", (subscription_name,)))

    def add_entry(self, subscription_name: str, message: proto.PubsubMessage, published_wall: float,
                  attempt: int = 0, acked: bool = False) -> None:
        """A message reached a subscription (published, or brought back by a seek)."""
        if self._conn is not None:
            self._record((_ADD_ENTRY, (subscription_name, int(message.message_id), message.SerializeToString(),
                                       published_wall, attempt, int(acked))))

    def attempted(self, subscription_name: str, message_id: str, attempt: int) -> None:
        """A message was handed out: its delivery attempt count."""
        if self._conn is not None:
            self._record((_SET_ATTEMPT, (attempt, subscription_name, int(message_id))))

    def acked(self, subscription_name: str, message_id: str, acked: bool) -> None:
        """A retained message was acknowledged, or a seek made it unacknowledged again."""
        if self._conn is not None:
            self._record((_SET_ACKED, (int(acked), subscription_name, int(message_id))))

    def remove_entry(self, subscription_name: str, message_id: str) -> None:
        """A message left a subscription for good (acked, dead-lettered, expired, dropped by a seek)."""
        if self._conn is not None:
            self._record((_REMOVE_ENTRY, (subscription_name, int(message_id))))

    def save_snapshot(self, snapshot: proto.Snapshot, messages: Iterable[tuple[proto.PubsubMessage, float]]) -> None:
        """A snapshot was created (with its messages) or its settings changed (``messages`` empty)."""
        if self._conn is not None:
            self._record(("INSERT OR REPLACE INTO snapshots (name, config) VALUES (?, ?)",
                          (snapshot.name, snapshot.SerializeToString())))
            for message, wall in messages:
                self.snapshot_message(snapshot.name, message, wall)

    def snapshot_message(self, snapshot_name: str, message: proto.PubsubMessage, published_wall: float) -> None:
        """A message the snapshot keeps (published to its topic after it was taken)."""
        if self._conn is not None:
            self._record(("INSERT OR REPLACE INTO snapshot_messages (snapshot, message_id, message, published_wall) "
                          "VALUES (?, ?, ?, ?)",
                          (snapshot_name, int(message.message_id), message.SerializeToString(), published_wall)))

    def delete_snapshot(self, snapshot_name: str) -> None:
        """A snapshot was deleted."""
        if self._conn is not None:
            self._record(("DELETE FROM snapshot_messages WHERE snapshot = ?", (snapshot_name,)))
            self._record(("DELETE FROM snapshots WHERE name = ?", (snapshot_name,)))


def _open(path: Path) -> sqlite3.Connection:
    """Open the database, create its tables, check its schema version."""
    try:
        # Owner-only: the messages are job requests and results, which may be confidential.
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # The writer thread uses the connection after this thread created it; only one thread at a time does.
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=LOCK_WAIT_S)
        # Exclusive: the first write below takes the file's lock and keeps it until close, so a second broker
        # on the same folder (whose state would silently diverge) is refused at start instead.
        conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
        conn.executescript(_SCHEMA)
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None:
            conn.execute("INSERT INTO meta (key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,))
        elif row[0] != SCHEMA_VERSION:
            conn.close()
            raise ValueError(f"{path}: broker data of schema version {row[0]}, this emulator reads version "
                             f"{SCHEMA_VERSION}; move the file aside to start with an empty broker")
        conn.isolation_level = "DEFERRED"  # `with conn:` then wraps each batch in one transaction
        return conn
    except sqlite3.Error as error:
        if "locked" in str(error):
            raise OSError(f"{path}: another broker is using this data folder; stop it first") from error
        raise OSError(f"{path}: cannot open the broker's data file ({error})") from error


def _read(conn: sqlite3.Connection, loaded: Loaded) -> Loaded:
    row = conn.execute("SELECT value FROM meta WHERE key = 'next_message_id'").fetchone()
    loaded.next_message_id = row[0] if row else 1
    for name, config, published in conn.execute("SELECT name, config, published FROM topics ORDER BY name"):
        loaded.topics.append((_parse(proto.Topic, config, name), published))
    for name, config, dead in conn.execute("SELECT name, config, dead_lettered FROM subscriptions ORDER BY name"):
        loaded.subscriptions.append((_parse(proto.Subscription, config, name), dead))
    for name, config in conn.execute("SELECT name, config FROM snapshots ORDER BY name").fetchall():
        messages = [StoredMessage(_parse(proto.PubsubMessage, blob, name), wall) for blob, wall in conn.execute(
            "SELECT message, published_wall FROM snapshot_messages WHERE snapshot = ? ORDER BY message_id", (name,))]
        loaded.snapshots.append((_parse(proto.Snapshot, config, name), messages))
    for topic, blob, wall in conn.execute("SELECT topic, message, published_wall FROM topic_messages "
                                          "ORDER BY topic, message_id"):
        retained = StoredMessage(_parse(proto.PubsubMessage, blob, topic), wall)
        loaded.topic_messages.setdefault(topic, []).append(retained)
    rows = conn.execute("SELECT subscription, message, published_wall, attempt, acked FROM entries "
                        "ORDER BY subscription, message_id")
    for subscription, blob, wall, attempt, acked in rows:
        stored = StoredMessage(_parse(proto.PubsubMessage, blob, subscription), wall, attempt, bool(acked))
        loaded.entries.setdefault(subscription, []).append(stored)
    return loaded


def _parse(kind: Any, blob: bytes, owner: str) -> Any:
    try:
        return kind.FromString(blob)
    except Exception as error:
        raise ValueError(f"a stored {kind.DESCRIPTOR.name} of {owner} does not parse: {error}") from error

