"""Contract-test fixtures: an emulator on a free loopback port and the real google-cloud-pubsub clients.

The tests themselves use only the client library, so they would pass against the official emulator.
The emulator-only knobs ``time_scale`` / ``lease_time_scale`` (protocol durations run faster) are
confined to the ``start_scaled`` fixture below: against another emulator, run those tests without them
(slowly).
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from google.cloud import pubsub_v1

from runtime.emulator import EmulatorHandle, start_emulator

PROJECT = os.environ.get("GOOGLE_CLOUD_PROJECT", "gpurt-test")
# Pause between polls of a pull loop (s): short next to every deadline the tests wait for.
POLL_INTERVAL_S = 0.05


@dataclass
class PubSub:
    """The clients of one test, bound to one emulator."""

    emulator: EmulatorHandle
    publisher: pubsub_v1.PublisherClient
    subscriber: pubsub_v1.SubscriberClient

    def topic(self, topic_id: str, *, create: bool = True) -> str:
        """The path of ``topic_id``, created unless told otherwise."""
        path = self.publisher.topic_path(PROJECT, topic_id)
        if create:
            self.publisher.create_topic(name=path)
        return path

    def subscription(self, subscription_id: str, topic: str, **settings: object) -> str:
        """Create a subscription on ``topic`` with ``settings`` (Subscription fields) and return its path."""
        path = self.subscriber.subscription_path(PROJECT, subscription_id)
        self.subscriber.create_subscription(request={"name": path, "topic": topic, **settings})
        return path

    def publish(self, topic: str, data: bytes, **attributes: str) -> str:
        """Publish one message and wait for its id."""
        return self.publisher.publish(topic, data, **attributes).result(timeout=10)

    def pull_within(self, subscription: str, seconds: float, want: int = 1) -> list:
        """Poll with immediate pulls until ``want`` messages arrived or ``seconds`` passed; return them."""
        deadline = time.monotonic() + seconds
        received: list = []
        while len(received) < want and time.monotonic() < deadline:
            with warnings.catch_warnings():
                # Deprecated, but still the one portable way to ask "anything there right now?".
                warnings.simplefilter("ignore", DeprecationWarning)
                response = self.subscriber.pull(
                    request={"subscription": subscription, "max_messages": want - len(received),
                             "return_immediately": True},
                    timeout=10,
                )
            received.extend(response.received_messages)
            if len(received) < want:
                time.sleep(POLL_INTERVAL_S)
        return received


def _clients(emulator: EmulatorHandle, monkeypatch: pytest.MonkeyPatch) -> Iterator[PubSub]:
    # The clients read PUBSUB_EMULATOR_HOST when they are created.
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", emulator.address)
    publisher = pubsub_v1.PublisherClient()
    subscriber = pubsub_v1.SubscriberClient()
    try:
        yield PubSub(emulator, publisher, subscriber)
    finally:
        subscriber.close()
        publisher.stop()
        publisher.transport.close()


@pytest.fixture
def emulator() -> Iterator[EmulatorHandle]:
    """An emulator running in real time."""
    with start_emulator() as handle:
        yield handle


@pytest.fixture
def pubsub(emulator: EmulatorHandle, monkeypatch: pytest.MonkeyPatch) -> Iterator[PubSub]:
    """Real clients against a real-time emulator."""
    yield from _clients(emulator, monkeypatch)


@pytest.fixture
def start_scaled(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[float], PubSub]]:
    """EMULATOR-ONLY: start an emulator whose protocol durations (ack deadlines, backoffs, retention) run
    ``time_scale`` times as long (0.05 turns a 10 s ack deadline into 0.5 s); return clients bound to it."""
    stack: list[tuple[EmulatorHandle, Iterator[PubSub]]] = []

    def start(time_scale: float) -> PubSub:
        handle = start_emulator(time_scale=time_scale, lease_time_scale=time_scale)
        clients = _clients(handle, monkeypatch)
        stack.append((handle, clients))
        return next(clients)

    yield start
    for handle, clients in reversed(stack):
        clients.close()
        handle.stop()
