"""Throughput of the two brokers through the real client: publish, and publish plus streaming pull and ack.

Each broker runs as its own process (the builtin as ``python -m runtime.local.broker``, in memory or durable
with ``--data-dir`` on a temporary folder; the official as its JVM), so the client's CPU is this
process's on all; the official emulator is the baseline of the same run. ``gpurt bench emulator`` prints
and writes the figures.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from runtime.local.broker.brokers import Broker
from runtime.local.broker.official import OfficialEmulatorError, find_official_emulator, start_official_emulator
from runtime.local.broker.process import builtin_process, default_clients

MESSAGE_BYTES: Final = 100  # a small job request
PROJECT: Final = "gpurt-bench"
START_TIMEOUT_S: Final = 60.0
# Bounds a run that stalls (a broker that stops delivering); far above any healthy run of the default size.
RUN_TIMEOUT_S: Final = 300.0
Progress = Callable[[int], None]

if TYPE_CHECKING:
    from google.cloud.pubsub_v1 import PublisherClient, SubscriberClient
    from google.cloud.pubsub_v1.subscriber.message import Message


@dataclass(frozen=True)
class BrokerFigures:
    """One broker's throughput."""

    broker: Broker
    durable: bool  # the builtin with a data directory (the local platform's default); False: in memory
    messages: int
    publish_per_s: float  # publish calls answered (client batching as configured by default)
    end_to_end_per_s: float  # published, delivered by streaming pull and acked


def measure(broker: Broker, messages: int, progress: Progress = lambda done: None, *,
            durable: bool = False) -> BrokerFigures:
    """Start ``broker`` as a process (the builtin with a data directory if ``durable``), measure both
    figures, stop it."""
    if durable and broker is not Broker.BUILTIN:
        raise ValueError("only the builtin broker can be durable: the official emulator keeps messages in memory")
    with _running(broker, durable) as address, default_clients(address) as (publisher, subscriber):
        topic = publisher.topic_path(PROJECT, "bench")
        publisher.create_topic(name=topic)
        publish_sub = subscriber.subscription_path(PROJECT, "bench-publish-only")
        subscriber.create_subscription(name=publish_sub, topic=topic, ack_deadline_seconds=600)
        publisher.publish(topic, b"warm-up").result(timeout=START_TIMEOUT_S)  # connect before timing
        publish_rate = _publish(publisher, topic, messages, progress)
        subscriber.delete_subscription(subscription=publish_sub)
        consume_sub = subscriber.subscription_path(PROJECT, "bench-consume")
        subscriber.create_subscription(name=consume_sub, topic=topic, ack_deadline_seconds=600)
        end_to_end = _publish_and_consume(publisher, subscriber, topic, consume_sub, messages, progress)
    return BrokerFigures(broker, durable, messages, publish_rate, end_to_end)


def _publish(publisher: PublisherClient, topic: str, messages: int, progress: Progress) -> float:
    payload = b"x" * MESSAGE_BYTES
    started = time.perf_counter()
    futures = [publisher.publish(topic, payload) for _ in range(messages)]
    for done, future in enumerate(futures, start=1):
        future.result(timeout=RUN_TIMEOUT_S)
        if done % 1000 == 0:
            progress(done)
    return messages / (time.perf_counter() - started)


def _publish_and_consume(publisher: PublisherClient, subscriber: SubscriberClient, topic: str, subscription: str,
                         messages: int, progress: Progress) -> float:
    received = 0
    all_in = threading.Event()
    lock = threading.Lock()

    def callback(message: Message) -> None:
        nonlocal received
        message.ack()
        with lock:
            received += 1
            if received % 1000 == 0:
                progress(received)
            if received >= messages:
                all_in.set()

    started = time.perf_counter()
    streaming = subscriber.subscribe(subscription, callback)
    try:
        payload = b"x" * MESSAGE_BYTES
        for future in [publisher.publish(topic, payload) for _ in range(messages)]:
            future.result(timeout=RUN_TIMEOUT_S)
        if not all_in.wait(RUN_TIMEOUT_S):
            raise TimeoutError(f"only {received} of {messages} messages arrived within {RUN_TIMEOUT_S:.0f} s")
        return messages / (time.perf_counter() - started)
    finally:
        streaming.cancel()
        streaming.result(timeout=30)


@contextmanager
def _running(broker: Broker, durable: bool) -> Iterator[str]:
    """Run ``broker`` as a process on a free loopback port; yield its address."""
    if broker is Broker.OFFICIAL:
        installed = find_official_emulator()
        if installed is None:
            raise OfficialEmulatorError("the official emulator needs the gcloud CLI, which is not installed")
        with start_official_emulator(installed) as handle:
            yield handle.address
        return
    with tempfile.TemporaryDirectory(prefix="gpurt-bench-broker-") as data_dir:
        options = ["--data-dir", data_dir] if durable else []
        with builtin_process(*options) as (_, address):
            yield address
