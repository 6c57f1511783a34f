"""Subscriptions with an expiration policy are deleted after their ttl unused, through the real client.

Issue #35: expired client subscriptions never expired on the local broker (8 became 61, each piling up
results). The emulator-only ``time_scale`` makes the service's shortest ttl, one day, last about a second.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from google.api_core import exceptions

from runtime.local.broker import EmulatorHandle, start_emulator
from runtime.local.broker.expiry import MIN_TTL_S
from tests.runtime.local.broker.conftest import PubSub, builtin_clients

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TTL_REAL_S = 1.0  # what one day of ttl lasts at TIME_SCALE
TIME_SCALE = TTL_REAL_S / MIN_TTL_S
ONE_DAY = {"expiration_policy": {"ttl": {"seconds": MIN_TTL_S}}}
WAIT_S = 30.0  # bound on waiting for an expiry that is due after TTL_REAL_S


@pytest.fixture
def scaled(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[EmulatorHandle, PubSub]]:
    # backoffs and retention scaled, ack deadlines not: a streaming client keeps its leases as it would
    with start_emulator(time_scale=TIME_SCALE) as handle:
        clients = builtin_clients(handle, monkeypatch)
        try:
            yield handle, next(clients)
        finally:
            clients.close()


def _gone_within(pubsub: PubSub, subscription: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            pubsub.subscriber.get_subscription(subscription=subscription)
        except exceptions.NotFound:
            return True
        time.sleep(0.1)
    return False


def test_an_unused_subscription_expires_one_in_use_or_without_policy_does_not(
    scaled: tuple[EmulatorHandle, PubSub],
) -> None:
    _, pubsub = scaled
    topic = pubsub.topic("results")
    crashed = pubsub.subscription("client-crashed", topic, **ONE_DAY)
    listening = pubsub.subscription("client-listening", topic, **ONE_DAY)
    platform = pubsub.subscription("platform", topic)  # no policy: never expires here
    never = pubsub.subscription("never", topic, expiration_policy={})  # a policy without ttl: never either
    stream = pubsub.subscriber.subscribe(listening, callback=lambda message: message.ack())
    try:
        assert _gone_within(pubsub, crashed, WAIT_S)
        pubsub.publish(topic, b"result")  # reaches only what is left
        for alive in (listening, platform, never):
            assert pubsub.subscriber.get_subscription(subscription=alive).name == alive
    finally:
        stream.cancel()
        stream.result(timeout=10)
    # the stream closed: from now on it is unused too
    assert _gone_within(pubsub, listening, WAIT_S)
    remaining = {s.name for s in pubsub.subscriber.list_subscriptions(project=f"projects/{pubsub.project}")}
    assert remaining == {platform, never}


def test_using_a_subscription_postpones_its_expiry(scaled: tuple[EmulatorHandle, PubSub]) -> None:
    _, pubsub = scaled
    topic = pubsub.topic("results")
    polled = pubsub.subscription("polled", topic, **ONE_DAY)
    started = time.monotonic()
    while time.monotonic() - started < 3 * TTL_REAL_S:  # pulls more often than the ttl, for three ttls
        pubsub.pull_within(polled, 0.2)
    assert pubsub.subscriber.get_subscription(subscription=polled).name == polled
    assert _gone_within(pubsub, polled, WAIT_S)


def test_a_ttl_under_a_day_is_refused_as_the_service_does(scaled: tuple[EmulatorHandle, PubSub]) -> None:
    _, pubsub = scaled
    with pytest.raises(exceptions.InvalidArgument, match=r"expiration_policy\.ttl"):
        pubsub.subscription("short", pubsub.topic("results"), expiration_policy={"ttl": {"seconds": 3600}})
