"""The scheduler's consumer picks up new work within seconds of the emulator restarting on its port.

A real emulator, the real google-cloud-pubsub subscriber on the project's emulator channel, and the
scheduler's ``Consumer``: the emulator is stopped while the stream is open, started again on the same port
(empty, as a restarted process is) and the contract's topology is recreated, as
``LocalPlatform.restart_emulator`` does. Before the fix the client used up its stream reopens against the
closed port in milliseconds and waited out the rest of its 10 s throttle (and a stream reopened inside
another's failure was left open unread, holding messages until their 60 s lease expired); a stream that
reconnected before the subscription existed waited a fixed 5 s.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from runtime.local.broker import EmulatorHandle, start_emulator
from runtime.protocol import contract
from runtime.pubsub.admin import ensure_topology, subscription_path, topic_path
from runtime.pubsub.clients import publisher_client, subscriber_client
from runtime.scheduler.consumer import Consumer
from runtime.scheduler.records import Decision, Delivery, Settle
from tests.runtime.scheduler.platform import wait_for

PROJECT = "gpurt-restart"
JOBS = 5
# New work must be picked up within this long of the broker being back with its topology (seconds):
# the channel reconnects within a second, a consumer stream refused meanwhile is reopened within half a
# second. The client's own stall was about 9 s, so this also leaves a loaded machine ample room.
PICKUP_S = 4.0


def _topology(address: str) -> None:
    publisher, subscriber = publisher_client(address), subscriber_client(address)
    try:
        ensure_topology(PROJECT, publisher, subscriber)
    finally:
        publisher.transport.close()
        subscriber.close()


class Received:
    """The consumer's processor: records each job id it is handed and acks it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.job_ids: set[str] = set()

    def __call__(self, delivery: Delivery) -> Decision:
        job_id = delivery.attributes["job_id"]
        with self._lock:
            self.job_ids.add(job_id)
        return Decision(Settle.ACK, job_id)

    def has(self, job_ids: set[str]) -> bool:
        with self._lock:
            return job_ids <= self.job_ids


@pytest.fixture
def emulators() -> Iterator[list[EmulatorHandle]]:
    """The running emulator, in a list so the test can replace it; whichever is last is stopped."""
    handles = [start_emulator(port=0)]
    _topology(handles[0].address)
    yield handles
    handles[-1].stop()


def _publish(address: str, label: str) -> set[str]:
    publisher = publisher_client(address)
    try:
        topic = topic_path(PROJECT, contract.REQUEST_TOPIC)
        job_ids = {f"{label}-{i}" for i in range(JOBS)}
        for future in [publisher.publish(topic, b"{}", job_id=job_id) for job_id in sorted(job_ids)]:
            future.result(timeout=10)
        return job_ids
    finally:
        publisher.transport.close()


@pytest.mark.timeout(60)
def test_new_jobs_are_picked_up_within_seconds_of_a_broker_restart(emulators: list[EmulatorHandle]) -> None:
    address, port = emulators[0].address, emulators[0].port
    received = Received()
    subscriber = subscriber_client(address)
    consumer = Consumer(subscriber, subscription_path(PROJECT, contract.REQUEST_SUBSCRIPTION), received, slots=2)
    consumer.start()
    try:
        before = _publish(address, "before")
        wait_for(lambda: received.has(before), 10, "jobs before the restart")
        for round_ in range(2):  # the first restart of a fresh client, and a later one
            emulators[-1].stop()
            emulators.append(start_emulator(port=port))
            _topology(address)
            after = _publish(address, f"after-{round_}")
            wait_for(lambda jobs=after: received.has(jobs), PICKUP_S,
                     f"the consumer to pick up {JOBS} new jobs after broker restart {round_ + 1}")
            assert consumer.running
    finally:
        consumer.stop(10)
        subscriber.close()
