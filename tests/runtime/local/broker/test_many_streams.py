"""Hundreds of open StreamingPull streams while topics are created and messages published, through the
real client's asyncio surface (one event loop holds every stream, so the test itself needs no threads)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
from google.pubsub_v1.services.publisher import PublisherAsyncClient
from google.pubsub_v1.services.publisher.transports import PublisherGrpcAsyncIOTransport
from google.pubsub_v1.services.subscriber import SubscriberAsyncClient
from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcAsyncIOTransport
from google.pubsub_v1.types import StreamingPullRequest

from tests.runtime.local.broker import ON_THE_OFFICIAL_EMULATOR
from tests.runtime.local.broker.conftest import PubSub

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), ON_THE_OFFICIAL_EMULATOR]

STREAMS = 200
MESSAGES = 50
RPC_TIMEOUT_S = 10.0  # a unary call queued behind busy streams would run into this
WAIT_S = 30.0


async def _scenario(pubsub: PubSub) -> tuple[int, int]:
    """Open STREAMS streams, then create a topic and publish while they stay open; return (streams still open,
    messages the streams received)."""
    channel = grpc.aio.insecure_channel(pubsub.address)
    publisher = PublisherAsyncClient(transport=PublisherGrpcAsyncIOTransport(channel=channel))
    subscriber = SubscriberAsyncClient(transport=SubscriberGrpcAsyncIOTransport(channel=channel))
    topic = publisher.topic_path(pubsub.project, "busy")
    subscription = pubsub.subscription_path("busy-sub")
    await publisher.create_topic(name=topic, timeout=RPC_TIMEOUT_S)
    await subscriber.create_subscription(name=subscription, topic=topic, ack_deadline_seconds=600,
                                         timeout=RPC_TIMEOUT_S)
    closing = asyncio.Event()
    received: list[str] = []
    all_arrived = asyncio.Event()

    async def requests() -> AsyncIterator[StreamingPullRequest]:
        yield StreamingPullRequest(subscription=subscription, stream_ack_deadline_seconds=600)
        await closing.wait()  # send nothing more; the stream stays open until the test ends

    async def read(stream: AsyncIterator) -> None:
        async for response in stream:
            received.extend(m.message.message_id for m in response.received_messages)
            if len(received) >= MESSAGES:
                all_arrived.set()

    streams = [await subscriber.streaming_pull(requests=requests()) for _ in range(STREAMS)]
    readers = [asyncio.create_task(read(stream)) for stream in streams]
    try:
        await asyncio.sleep(0)  # let every stream's first request go out
        # With every stream open, the broker must still answer everything else at once.
        other = publisher.topic_path(pubsub.project, "created-while-busy")
        await publisher.create_topic(name=other, timeout=RPC_TIMEOUT_S)
        for i in range(MESSAGES):
            await publisher.publish(topic=topic, messages=[{"data": f"m{i}".encode()}], timeout=RPC_TIMEOUT_S)
        await asyncio.wait_for(all_arrived.wait(), WAIT_S)
        open_streams = sum(not reader.done() for reader in readers)
    finally:
        closing.set()
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        await channel.close()
    return open_streams, len(set(received))


def test_hundreds_of_streams_do_not_stall_other_calls(pubsub: PubSub) -> None:
    open_streams, delivered = asyncio.run(_scenario(pubsub))
    assert open_streams == STREAMS
    assert delivered == MESSAGES
