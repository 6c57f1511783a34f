"""The durable broker's data file shrinks once its messages are acknowledged, and keeps every unacknowledged one.

Before compaction the file only grew: SQLite keeps the pages of deleted rows as free pages and the WAL at its
largest size, so a long run's acknowledged messages stayed on disk (273 MB after a chaos run).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from runtime.access.transport import make_clients
from runtime.local.broker import journal, start_emulator
from runtime.local.broker.journal import DATABASE_FILE

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PROJECT = "gpurt-compact"
MESSAGES = 1500
BODY = b"x" * 2048  # 3 MB of messages in all
KEPT = 7  # left unacknowledged: they must survive the compaction and a restart
SHRINK_WAIT_S = 30.0
TIMEOUT_S = 30.0


def _on_disk(data_dir: Path) -> int:
    """Bytes of the database and its WAL."""
    return sum(path.stat().st_size for path in data_dir.glob(f"{DATABASE_FILE}*") if path.is_file())


def _pull_all(clients, subscription: str, want: int) -> list:  # type: ignore[no-untyped-def]
    received: list = []
    while len(received) < want:
        batch = clients.subscriber.pull(subscription=subscription, max_messages=min(500, want - len(received)),
                                        timeout=TIMEOUT_S).received_messages
        if not batch:
            break
        received.extend(batch)
    return received


def test_the_file_shrinks_after_acks_and_nothing_unacked_is_lost_across_a_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Small enough thresholds for a test of seconds; the rule is the module's.
    monkeypatch.setattr(journal, "COMPACT_MIN_BYTES", 256 * 1024)
    monkeypatch.setattr(journal, "COMPACT_CHECK_S", 0.2)
    topic, subscription = f"projects/{PROJECT}/topics/topic-a", f"projects/{PROJECT}/subscriptions/sub-a"
    with start_emulator(data_dir=tmp_path) as emulator:
        clients = make_clients(PROJECT, emulator.address)
        try:
            clients.publisher.create_topic(name=topic)
            clients.subscriber.create_subscription(name=subscription, topic=topic, ack_deadline_seconds=600)
            futures = [clients.publisher.publish(topic, BODY, n=str(n)) for n in range(MESSAGES)]
            for future in futures:
                future.result(timeout=TIMEOUT_S)
            full = _on_disk(tmp_path)
            received = _pull_all(clients, subscription, MESSAGES)
            assert len(received) == MESSAGES
            kept = {m.message.message_id for m in received[:KEPT]}
            acked = [m.ack_id for m in received[KEPT:]]
            for start in range(0, len(acked), 500):
                clients.subscriber.acknowledge(subscription=subscription, ack_ids=acked[start:start + 500])
            clients.subscriber.modify_ack_deadline(  # back to the subscription, unacknowledged
                subscription=subscription, ack_ids=[m.ack_id for m in received[:KEPT]], ack_deadline_seconds=0)
            deadline = time.monotonic() + SHRINK_WAIT_S
            while _on_disk(tmp_path) > full / 4 and time.monotonic() < deadline:
                time.sleep(0.1)
            shrunk = _on_disk(tmp_path)
        finally:
            clients.close()
    assert full > 3 * 1024 * 1024
    assert shrunk <= full / 4, f"{full} bytes with every message, {shrunk} once all but {KEPT} were acknowledged"

    with start_emulator(data_dir=tmp_path) as emulator:
        clients = make_clients(PROJECT, emulator.address)
        try:
            again = _pull_all(clients, subscription, MESSAGES)
        finally:
            clients.close()
    assert {m.message.message_id for m in again} == kept
    assert all(m.message.data == BODY for m in again)


def test_a_file_an_earlier_run_left_mostly_free_is_compacted_at_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal, "COMPACT_MIN_BYTES", 256 * 1024)
    monkeypatch.setattr(journal, "COMPACT_CHECK_S", 3600.0)  # no look while it runs: only the one at start
    topic, subscription = f"projects/{PROJECT}/topics/topic-a", f"projects/{PROJECT}/subscriptions/sub-a"
    with start_emulator(data_dir=tmp_path) as emulator:
        clients = make_clients(PROJECT, emulator.address)
        try:
            clients.publisher.create_topic(name=topic)
            clients.subscriber.create_subscription(name=subscription, topic=topic, ack_deadline_seconds=600)
            for future in [clients.publisher.publish(topic, BODY) for _ in range(MESSAGES)]:
                future.result(timeout=TIMEOUT_S)
            received = _pull_all(clients, subscription, MESSAGES)
            for start in range(0, len(received), 500):
                clients.subscriber.acknowledge(subscription=subscription,
                                               ack_ids=[m.ack_id for m in received[start:start + 500]])
        finally:
            clients.close()
    left = _on_disk(tmp_path)
    with start_emulator(data_dir=tmp_path):
        assert _on_disk(tmp_path) <= left / 4
