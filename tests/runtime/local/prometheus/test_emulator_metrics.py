"""The emulator's ``GET /metrics``: Pub/Sub series under the cloud's names, read by prometheus-client's parser."""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from runtime.protocol import contract

PROJECT = "gpurt-monitoring-test"
M = contract.PUBSUB_METRICS


def _samples(admin_port: int) -> dict[tuple[str, str], float]:
    text = httpx.get(f"http://127.0.0.1:{admin_port}{contract.METRICS_PATH}", timeout=5).text
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    assert {s.labels[M.resource_label[0]] for s in samples} == {M.resource_label[1]}
    return {(s.name, s.labels[M.subscription_label]): s.value for s in samples}


@pytest.mark.timeout(60)
def test_backlog_age_and_dead_letters_per_subscription() -> None:
    from runtime.access.transport import make_clients
    from runtime.local.broker import start_emulator
    from runtime.pubsub.admin import ensure_topology

    emulator = start_emulator(port=0, admin_port=0)
    clients = make_clients(PROJECT, emulator.address)
    try:
        ensure_topology(PROJECT, clients.publisher, clients.subscriber)
        topic = clients.publisher.topic_path(PROJECT, contract.REQUEST_TOPIC)
        for _ in range(3):
            clients.publisher.publish(topic, b"{}").result(timeout=10)
        dlq_topic = clients.publisher.topic_path(PROJECT, contract.REQUEST_DLQ_TOPIC)
        clients.publisher.publish(dlq_topic, b"{}").result(timeout=10)
        time.sleep(0.2)  # let the oldest message age measurably

        samples = _samples(emulator.admin_port)

        assert samples[(M.undelivered, contract.REQUEST_SUBSCRIPTION)] == 3
        assert samples[(M.undelivered, contract.REQUEST_DLQ_SUBSCRIPTION)] == 1  # the DLQ depth
        assert samples[(M.undelivered, contract.RESULT_SUBSCRIPTION)] == 0
        assert samples[(M.oldest_unacked_age, contract.REQUEST_SUBSCRIPTION)] >= 0.2
        assert samples[(M.oldest_unacked_age, contract.RESULT_SUBSCRIPTION)] == 0  # nothing waits there
        assert samples[(M.dead_lettered, contract.REQUEST_SUBSCRIPTION)] == 0
    finally:
        clients.close()
        emulator.stop()
