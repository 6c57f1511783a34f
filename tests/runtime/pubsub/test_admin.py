"""The contract's topology, created on the emulator through the real client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runtime.local.broker import EmulatorHandle, start_emulator
from runtime.protocol import contract
from runtime.pubsub.admin import ensure_topology, subscription_path
from runtime.pubsub.clients import publisher_client, subscriber_client

pytestmark = pytest.mark.integration


@pytest.fixture
def emulator() -> Iterator[EmulatorHandle]:
    handle = start_emulator("127.0.0.1", 0)
    yield handle
    handle.stop()


def test_ensure_topology_creates_the_contract_once(emulator: EmulatorHandle) -> None:
    publisher, subscriber = publisher_client(emulator.address), subscriber_client(emulator.address)
    try:
        created = ensure_topology("adm", publisher, subscriber)
        assert set(created) == {t.name for t in contract.TOPICS} | {s.name for s in contract.SUBSCRIPTIONS}
        assert ensure_topology("adm", publisher, subscriber) == []
        sub = subscriber.get_subscription(subscription=subscription_path("adm", contract.REQUEST_SUBSCRIPTION))
        assert sub.ack_deadline_seconds == contract.ACK_DEADLINE_S
        assert sub.message_retention_duration.total_seconds() == contract.MESSAGE_RETENTION_S
        assert sub.dead_letter_policy.max_delivery_attempts == contract.MAX_DELIVERY_ATTEMPTS
        assert sub.dead_letter_policy.dead_letter_topic.endswith(contract.REQUEST_DLQ_TOPIC)
        assert sub.retry_policy.minimum_backoff.total_seconds() == contract.RETRY_MIN_BACKOFF_S
    finally:
        subscriber.close()
