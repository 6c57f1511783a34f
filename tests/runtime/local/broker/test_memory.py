"""What acknowledged and refused messages cost the broker afterwards: its own accounting, and its process's memory.

Issue #35: after about 13 messages of 10 MB the broker stayed at 461 MB until restarted. Acknowledged
messages stayed referenced by the lease heap until their deadline; a refused request stayed referenced by the
aborted call's traceback; and what was freed stayed in the C allocator's heaps.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from google.api_core import exceptions
from google.pubsub_v1.services.publisher import PublisherClient as GeneratedPublisherClient

from runtime.local.broker import start_emulator
from runtime.local.broker.process import builtin_process, default_clients
from tests.runtime.local.broker.conftest import PROJECT, builtin_clients

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

MESSAGE_BYTES = 3_900_000  # under the 4 MiB a default Pull client receives
ACKED_MESSAGES = 20
REFUSED_BYTES = 20_000_000  # over the 10 MB request limit, under what a test can spare
REFUSED_REQUESTS = 13
# What the broker process may keep after all of it (MB): it held 160 to 400 MB more before.
RSS_GROWTH_LIMIT_MB = 64


def _pull_and_ack(subscriber, subscription: str, count: int) -> None:  # type: ignore[no-untyped-def]
    for _ in range(count):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            answer = subscriber.pull(request={"subscription": subscription, "max_messages": 1}, timeout=30)
        subscriber.acknowledge(subscription=subscription, ack_ids=[m.ack_id for m in answer.received_messages])


def test_acknowledged_messages_are_no_longer_held(monkeypatch: pytest.MonkeyPatch) -> None:
    with start_emulator() as emulator:
        clients = builtin_clients(emulator, monkeypatch)
        pubsub = next(clients)
        try:
            topic = pubsub.topic("requests")
            sub = pubsub.subscription("requests-sub", topic, ack_deadline_seconds=600)
            for _ in range(5):
                pubsub.publish(topic, b"x" * MESSAGE_BYTES)
            assert emulator.stats().subscription(sub).held_bytes >= 5 * MESSAGE_BYTES
            _pull_and_ack(pubsub.subscriber, sub, 5)
            # acked with 600 s left on their leases: nothing of them is held meanwhile
            stats = emulator.stats().subscription(sub)
            assert (stats.undelivered, stats.outstanding, stats.held_bytes) == (0, 0, 0)
        finally:
            clients.close()


def test_the_broker_process_gives_back_what_acknowledged_and_refused_messages_took(tmp_path: Path) -> None:
    with (
        builtin_process("--data-dir", str(tmp_path)) as (process, address),
        default_clients(address) as (publisher, subscriber),
    ):
        topic = publisher.topic_path(PROJECT, "requests")
        sub = subscriber.subscription_path(PROJECT, "requests-sub")
        publisher.create_topic(name=topic)
        subscriber.create_subscription(name=sub, topic=topic)
        # one Publish request as given: the high-level client refuses an oversized message itself
        generated = GeneratedPublisherClient(transport=publisher.transport)
        before = _rss_mb(process.pid)
        for _ in range(ACKED_MESSAGES):
            publisher.publish(topic, b"x" * MESSAGE_BYTES).result(timeout=30)
            _pull_and_ack(subscriber, sub, 1)
        for _ in range(REFUSED_REQUESTS):
            with pytest.raises(exceptions.InvalidArgument):
                generated.publish(topic=topic, messages=[{"data": b"y" * REFUSED_BYTES}], retry=None, timeout=30)
        grown = _rss_mb(process.pid) - before
    assert grown < RSS_GROWTH_LIMIT_MB, f"the broker kept {grown} MB after its messages were acked or refused"


def _rss_mb(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) // 1024
