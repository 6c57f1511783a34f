"""EMULATOR-ONLY: the stats view (in-process and ``GET /stats``) and ``python -m runtime.local.broker``.
These have no counterpart in the official emulator."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.cloud import pubsub_v1

from runtime.local.broker import EmulatorHandle, start_emulator
from tests.runtime.local.broker.conftest import PROJECT, PubSub, builtin_clients

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture
def admin_pubsub(monkeypatch: pytest.MonkeyPatch) -> Iterator[PubSub]:
    """Clients against an emulator that also serves the admin port."""
    with start_emulator(admin_port=0) as handle:
        yield from builtin_clients(handle, monkeypatch)


def _fetch_stats(emulator: EmulatorHandle) -> dict:
    with urllib.request.urlopen(f"http://{emulator.host}:{emulator.admin_port}/stats", timeout=5) as response:
        return json.load(response)


def test_stats_count_backlog_outstanding_and_dead_letters(admin_pubsub: PubSub) -> None:
    pubsub = admin_pubsub
    topic, dlq = pubsub.topic("requests"), pubsub.topic("requests-dlq")
    pubsub.subscription("requests-dlq-sub", dlq)
    sub = pubsub.subscription("requests-sub", topic,
                              dead_letter_policy={"dead_letter_topic": dlq, "max_delivery_attempts": 5})
    for i in range(3):
        pubsub.publish(topic, f"m{i}".encode())

    [leased] = pubsub.pull_within(sub, 5)
    stats = pubsub.emulator.stats().subscription("requests-sub")
    assert (stats.undelivered, stats.outstanding, stats.dead_lettered) == (2, 1, 0)
    rest = pubsub.pull_within(sub, 5, want=2)
    pubsub.subscriber.acknowledge(subscription=sub, ack_ids=[m.ack_id for m in [leased, *rest]])
    stats = pubsub.emulator.stats().subscription("requests-sub")
    assert (stats.undelivered, stats.outstanding) == (0, 0)

    pubsub.publish(topic, b"poison")
    for _ in range(5):
        [leased] = pubsub.pull_within(sub, 5)
        pubsub.subscriber.modify_ack_deadline(subscription=sub, ack_ids=[leased.ack_id], ack_deadline_seconds=0)
    served = _fetch_stats(pubsub.emulator)
    assert served["subscriptions"][sub]["dead_lettered"] == 1
    assert served["subscriptions"][pubsub.subscriber.subscription_path(PROJECT, "requests-dlq-sub")]["undelivered"] == 1
    assert served["published"] == {topic: 4, dlq: 1}


def test_admin_port_answers_404_for_other_paths(admin_pubsub: PubSub) -> None:
    url = f"http://{admin_pubsub.emulator.host}:{admin_pubsub.emulator.admin_port}/nope"
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(url, timeout=5)
    assert raised.value.code == 404


def test_a_taken_port_is_refused_not_shared(emulator: EmulatorHandle) -> None:
    with pytest.raises(OSError, match="cannot listen"):
        start_emulator(port=emulator.port)


def test_time_scales_must_be_positive() -> None:
    with pytest.raises(ValueError, match="time_scale"):
        start_emulator(time_scale=0)
    with pytest.raises(ValueError, match="lease_time_scale"):
        start_emulator(lease_time_scale=-1)


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_module_entry_point_serves_until_sigterm(monkeypatch: pytest.MonkeyPatch) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "runtime.local.broker", "--port", "0", "--admin-port", "0", "--rest-port", "0"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        first_line = process.stdout.readline().strip()
        assert first_line.startswith("PUBSUB_EMULATOR_HOST=127.0.0.1:")
        rest_root = process.stdout.readline().strip().split("=", 1)[1]
        with urllib.request.urlopen(rest_root.removesuffix("/v1") + "/", timeout=5) as ready:
            assert ready.read() == b"Ok"
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", first_line.split("=", 1)[1])
        publisher = pubsub_v1.PublisherClient()
        topic = publisher.topic_path(PROJECT, "requests")
        assert publisher.create_topic(name=topic).name == topic
        publisher.transport.close()

        process.send_signal(signal.SIGTERM)
        # Read stderr while waiting: a broker whose log filled the pipe would block writing and never exit.
        _, stderr = process.communicate(timeout=20)
        assert process.returncode == 0
        log_lines = [json.loads(line) for line in stderr.splitlines()]  # every line is JSON
        assert {"pubsub emulator listening", "pubsub emulator stopped"} <= {line["message"] for line in log_lines}
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.fixture
def backoff_scaled_pubsub(monkeypatch: pytest.MonkeyPatch) -> Iterator[PubSub]:
    """Clients against an emulator with only ``time_scale`` set (backoffs 100 times shorter)."""
    with start_emulator(time_scale=0.01) as handle:
        yield from builtin_clients(handle, monkeypatch)


def test_time_scale_shortens_backoff_but_not_leases(backoff_scaled_pubsub: PubSub) -> None:
    pubsub = backoff_scaled_pubsub
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic, ack_deadline_seconds=10,
                              retry_policy={"minimum_backoff": {"seconds": 10}})
    pubsub.publish(topic, b"job")
    [received] = pubsub.pull_within(sub, 5)
    assert pubsub.pull_within(sub, 0.5) == []  # the 10 s lease runs in real time
    pubsub.subscriber.modify_ack_deadline(subscription=sub, ack_ids=[received.ack_id], ack_deadline_seconds=0)
    [again] = pubsub.pull_within(sub, 2)  # a 10 s backoff lasts 0.1 s
    assert again.message.message_id == received.message.message_id
