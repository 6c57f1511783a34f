"""StreamingPull through the real client: the high-level ``subscribe()`` the runtime uses, and the raw
bidirectional stream where the server's own flow control must be visible."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator

import pytest
from google.api_core import exceptions
from google.cloud import pubsub_v1
from google.pubsub_v1 import types

from tests.runtime.local.broker import ON_THE_OFFICIAL_EMULATOR
from tests.runtime.local.broker.conftest import PubSub

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60), ON_THE_OFFICIAL_EMULATOR]

WAIT_S = 10  # generous bound for anything that should happen within milliseconds


class Collector:
    """A subscriber callback that records messages and lets a test wait for a count."""

    def __init__(self, ack: bool = True, hold_s: float = 0.0) -> None:
        self.messages: list[pubsub_v1.subscriber.message.Message] = []
        self.max_in_callback = 0
        self._in_callback = 0
        self._ack = ack
        self._hold_s = hold_s
        self._cond = threading.Condition()

    def __call__(self, message: pubsub_v1.subscriber.message.Message) -> None:
        with self._cond:
            self._in_callback += 1
            self.max_in_callback = max(self.max_in_callback, self._in_callback)
        time.sleep(self._hold_s)  # stands for the work a consumer does while holding the message
        with self._cond:
            self._in_callback -= 1
            self.messages.append(message)
            self._cond.notify_all()
        message.ack() if self._ack else message.nack()

    def wait_for(self, count: int, timeout: float = WAIT_S) -> list[bytes]:
        """Wait until ``count`` messages were handled; return their data."""
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.messages) >= count, timeout), (
                f"got {len(self.messages)} of {count} messages")
            return [m.data for m in self.messages]


def test_subscribe_delivers_messages_published_before_and_after(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic, ack_deadline_seconds=600)
    early = [f"early-{i}".encode() for i in range(5)]
    late = [f"late-{i}".encode() for i in range(5)]
    for data in early:
        pubsub.publish(topic, data)
    collector = Collector()
    future = pubsub.subscriber.subscribe(sub, collector)
    try:
        for data in late:
            pubsub.publish(topic, data)
        assert sorted(collector.wait_for(10)) == sorted(early + late)
    finally:
        future.cancel()
        future.result(timeout=WAIT_S)


def test_subscribe_honours_flow_control(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic, ack_deadline_seconds=600)
    sent = [f"job-{i}".encode() for i in range(12)]
    for data in sent:
        pubsub.publish(topic, data)
    collector = Collector(hold_s=0.05)
    future = pubsub.subscriber.subscribe(sub, collector, flow_control=pubsub_v1.types.FlowControl(max_messages=3))
    try:
        assert sorted(collector.wait_for(len(sent))) == sorted(sent)
        assert 1 <= collector.max_in_callback <= 3
    finally:
        future.cancel()
        future.result(timeout=WAIT_S)


def _open_stream(pubsub: PubSub, subscription: str, max_outstanding: int) -> tuple[queue.Queue, Iterator]:
    """A raw StreamingPull; returns (queue of received messages, the response stream to cancel)."""
    first = types.StreamingPullRequest(subscription=subscription, stream_ack_deadline_seconds=60,
                                       max_outstanding_messages=max_outstanding)
    idle = threading.Event()

    def requests() -> Iterator[types.StreamingPullRequest]:
        yield first
        idle.wait()  # send nothing more; acks go through the unary Acknowledge RPC like the client's

    stream = pubsub.subscriber.streaming_pull(requests=requests())
    received: queue.Queue = queue.Queue()

    def read() -> None:
        try:
            for response in stream:
                for message in response.received_messages:
                    received.put(message)
        except exceptions.Cancelled:
            pass
        finally:
            idle.set()

    threading.Thread(target=read, daemon=True).start()
    return received, stream


def _take(received: queue.Queue, count: int, within_s: float = WAIT_S) -> list:
    """Up to ``count`` messages from the stream, waiting at most ``within_s`` in all."""
    messages = []
    deadline = time.monotonic() + within_s
    while len(messages) < count and (left := deadline - time.monotonic()) > 0:
        try:
            messages.append(received.get(timeout=left))
        except queue.Empty:
            break
    return messages


@pytest.mark.official_differs("it ignores a stream's max_outstanding_messages and sends everything at once; the "
                              "service honours it (the client library's own flow control still holds on both)")
def test_server_never_exceeds_max_outstanding_messages(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("requests-sub", topic, ack_deadline_seconds=600)
    for i in range(5):
        pubsub.publish(topic, f"m{i}".encode())
    received, stream = _open_stream(pubsub, sub, max_outstanding=2)
    try:
        held = _take(received, 2)
        assert len(held) == 2
        assert _take(received, 1, within_s=0.5) == []  # full until something is acked
        pubsub.subscriber.acknowledge(subscription=sub, ack_ids=[held[0].ack_id])
        [next_one] = _take(received, 1)
        assert _take(received, 1, within_s=0.3) == []
        pubsub.subscriber.acknowledge(subscription=sub, ack_ids=[held[1].ack_id, next_one.ack_id])
        assert len(_take(received, 2)) == 2
    finally:
        stream.cancel()


def test_nacked_messages_dead_letter_after_max_attempts(pubsub: PubSub) -> None:
    topic, dlq = pubsub.topic("requests"), pubsub.topic("requests-dlq")
    dlq_sub = pubsub.subscription("requests-dlq-sub", dlq)
    sub = pubsub.subscription("requests-sub", topic, ack_deadline_seconds=600,
                              dead_letter_policy={"dead_letter_topic": dlq, "max_delivery_attempts": 5})
    pubsub.publish(topic, b"poison", job_id="p1", type="noop")
    failing = Collector(ack=False)
    dead = Collector()
    futures = [pubsub.subscriber.subscribe(sub, failing), pubsub.subscriber.subscribe(dlq_sub, dead)]
    try:
        dead.wait_for(1)
        dead_letter = dead.messages[0]
        assert [m.delivery_attempt for m in failing.messages] == [1, 2, 3, 4, 5]
        assert dead_letter.data == b"poison"
        assert {k: dead_letter.attributes[k] for k in ("job_id", "type")} == {"job_id": "p1", "type": "noop"}
    finally:
        for future in futures:
            future.cancel()
            future.result(timeout=WAIT_S)


def test_subscribe_to_a_missing_subscription_fails(pubsub: PubSub) -> None:
    missing = pubsub.subscription_path("no-such-sub")
    future = pubsub.subscriber.subscribe(missing, Collector())
    with pytest.raises(exceptions.NotFound):
        future.result(timeout=WAIT_S)
