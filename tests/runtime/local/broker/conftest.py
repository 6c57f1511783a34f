"""Contract-test fixtures: the real google-cloud-pubsub clients against either broker.

``pubsub`` runs each test twice: against the project's emulator (``builtin``, a fresh one per test) and
against Google's official emulator (``official``, one JVM per test session, each test in its own
project so tests cannot see each other's topics). The official run fails, never skips, where gcloud is
installed but its emulator is not; it skips only where there is no gcloud at all.

A test the official emulator does not pass says why with ``@pytest.mark.official_differs(reason)``: its
official run is an expected failure (strict, so a fixed difference is noticed; ``strict=False`` where the
official emulator's behaviour depends on timing), and docs/emulator.md lists the same differences.
The emulator-only knobs ``time_scale`` / ``lease_time_scale`` (protocol durations run faster) are
confined to the ``start_scaled`` fixture: those tests run on the builtin only.
"""

from __future__ import annotations

import itertools
import os
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from google.cloud import pubsub_v1

from runtime.local.broker import EmulatorHandle, start_emulator
from runtime.local.broker.official import OfficialEmulatorHandle, find_official_emulator, start_official_emulator

PROJECT = os.environ.get("GOOGLE_CLOUD_PROJECT", "gpurt-test")
# Pause between polls of a pull loop (s): short next to every deadline the tests wait for.
POLL_INTERVAL_S = 0.05
BUILTIN, OFFICIAL = "builtin", "official"
_official_projects = itertools.count(1)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "official_differs(reason): the official Pub/Sub emulator behaves differently here (xfail there)")


@dataclass
class PubSub:
    """The clients of one test, bound to one broker, in one project."""

    broker: str
    address: str
    publisher: pubsub_v1.PublisherClient
    subscriber: pubsub_v1.SubscriberClient
    project: str = PROJECT
    emulator: EmulatorHandle | None = None  # the builtin's handle (admin view); None on the official
    rest_address: str | None = None  # host:port of the REST (v1 JSON) surface: the builtin's own port

    @property
    def rest_root(self) -> str:
        """The REST API root, as REST clients take it (``http://host:port/v1``)."""
        return f"http://{self.rest_address or self.address}/v1"

    def topic(self, topic_id: str, *, create: bool = True) -> str:
        """The path of ``topic_id``, created unless told otherwise."""
        path = self.publisher.topic_path(self.project, topic_id)
        if create:
            self.publisher.create_topic(name=path)
        return path

    def subscription_path(self, subscription_id: str) -> str:
        """The path of ``subscription_id`` in this test's project."""
        return self.subscriber.subscription_path(self.project, subscription_id)

    def subscription(self, subscription_id: str, topic: str, **settings: object) -> str:
        """Create a subscription on ``topic`` with ``settings`` (Subscription fields) and return its path."""
        path = self.subscription_path(subscription_id)
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


def _clients(broker: str, address: str, monkeypatch: pytest.MonkeyPatch, project: str = PROJECT,
             emulator: EmulatorHandle | None = None) -> Iterator[PubSub]:
    # The clients read PUBSUB_EMULATOR_HOST when they are created.
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", address)
    publisher = pubsub_v1.PublisherClient()
    subscriber = pubsub_v1.SubscriberClient()
    try:
        rest = f"{emulator.host}:{emulator.rest_port}" if emulator and emulator.rest_port else None
        yield PubSub(broker, address, publisher, subscriber, project, emulator, rest)
    finally:
        subscriber.close()
        publisher.stop()
        publisher.transport.close()


def builtin_clients(emulator: EmulatorHandle, monkeypatch: pytest.MonkeyPatch) -> Iterator[PubSub]:
    """Clients bound to a builtin emulator started by the caller."""
    yield from _clients(BUILTIN, emulator.address, monkeypatch, emulator=emulator)


@pytest.fixture(scope="package")
def official_emulator() -> Iterator[OfficialEmulatorHandle]:
    """Google's official emulator, one for this package's tests (a JVM: stopped once they are done rather than
    left running to the end of the run); skipped only where gcloud is absent."""
    installed = find_official_emulator()  # raises (the tests error) where gcloud lacks the emulator
    if installed is None:
        pytest.skip("gcloud is not installed, so the official Pub/Sub emulator is not available")
    with start_official_emulator(installed) as handle:
        yield handle


@pytest.fixture
def emulator() -> Iterator[EmulatorHandle]:
    """A builtin emulator running in real time."""
    with start_emulator() as handle:
        yield handle


@pytest.fixture(params=[BUILTIN, OFFICIAL])
def pubsub(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[PubSub]:
    """Real clients against each broker in turn."""
    if request.param == BUILTIN:
        with start_emulator(rest_port=0) as handle:
            yield from builtin_clients(handle, monkeypatch)
        return
    marker = request.node.get_closest_marker("official_differs")
    if marker is not None:
        request.applymarker(pytest.mark.xfail(reason=f"official emulator: {marker.args[0]}",
                                              strict=marker.kwargs.get("strict", True)))
    official: OfficialEmulatorHandle = request.getfixturevalue("official_emulator")
    project = f"{PROJECT}-{next(_official_projects)}"
    yield from _clients(OFFICIAL, official.address, monkeypatch, project)


@pytest.fixture
def builtin_pubsub(emulator: EmulatorHandle, monkeypatch: pytest.MonkeyPatch) -> Iterator[PubSub]:
    """Real clients against the builtin only: for what it deliberately refuses (UNIMPLEMENTED features)."""
    yield from builtin_clients(emulator, monkeypatch)


@pytest.fixture
def start_scaled(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[float], PubSub]]:
    """EMULATOR-ONLY: start a builtin emulator whose protocol durations (ack deadlines, backoffs, retention)
    run ``time_scale`` times as long (0.05 turns a 10 s ack deadline into 0.5 s); return clients bound to it."""
    stack: list[tuple[EmulatorHandle, Iterator[PubSub]]] = []

    def start(time_scale: float) -> PubSub:
        handle = start_emulator(time_scale=time_scale, lease_time_scale=time_scale)
        clients = builtin_clients(handle, monkeypatch)
        stack.append((handle, clients))
        return next(clients)

    yield start
    for handle, clients in reversed(stack):
        clients.close()
        handle.stop()
