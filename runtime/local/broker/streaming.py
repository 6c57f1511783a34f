"""StreamingPull: one bidirectional stream per subscriber connection, served on the event loop.

The first request names the subscription, the stream's ack deadline and its flow control
(max_outstanding_messages / max_outstanding_bytes). A reader task applies the acks, modacks, deadline
changes and heartbeats of later requests while the response generator leases messages as they become
ready, never holding more than the flow control allows. Messages acked through the unary Acknowledge /
ModifyAckDeadline RPCs (which the Python client uses) free flow-control room just the same, because
the lease, not the stream, is what is counted. A stream costs a task and an event, not a thread, so
the number of open streams is bounded by memory, not by a pool.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator

import grpc

from runtime.local.broker import names, policy, proto
from runtime.local.broker.delivery import LeaseOwner, SubscriptionQueue
from runtime.local.broker.errors import PubSubError, detached, invalid_argument, not_found, shutting_down
from runtime.local.broker.limits import MAX_MESSAGES_PER_CALL
from runtime.local.broker.state import Broker
from runtime.local.broker.waiting import Wakeup


class StreamingPull:
    """The StreamingPull handler: ``handler(requests, context)`` yields StreamingPullResponses."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def __call__(
        self, requests: AsyncIterator[proto.StreamingPullRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[proto.StreamingPullResponse]:
        try:
            first = await anext(aiter(requests))
        except StopAsyncIteration:
            return
        if not first.subscription:
            raise invalid_argument("The first StreamingPullRequest must name a subscription.")
        policy.check_stream_deadline(first.stream_ack_deadline_seconds)
        session = _Session(self._broker, first)
        session.apply(first)
        async for response in session.run(requests):
            yield response


class _Session:
    """The state of one open stream."""

    def __init__(self, broker: Broker, first: proto.StreamingPullRequest) -> None:
        self._broker = broker
        self._subscription = first.subscription
        self._deadline_s = first.stream_ack_deadline_seconds
        self._max_messages = first.max_outstanding_messages  # 0: no limit
        self._max_bytes = first.max_outstanding_bytes  # 0: no limit
        self._owner = LeaseOwner()
        self._ended = False
        self._error: PubSubError | None = None
        self._wakeup = Wakeup()

    async def run(self, requests: AsyncIterator[proto.StreamingPullRequest]) -> AsyncIterator[
            proto.StreamingPullResponse]:
        """Read later requests in a task while leasing and sending messages, until either side ends."""
        queue = self._broker.watch(self._subscription, self._wakeup)
        reader = asyncio.create_task(self._read(requests), name="pubsub-emulator-stream-reader")
        try:
            while True:
                self._wakeup.clear()
                with self._broker.lock:
                    if self._broker.closed:
                        raise shutting_down()
                    if self._error is not None:
                        raise self._error
                    if self._ended:
                        return
                    if queue.closed:
                        raise not_found(names.parse(self._subscription, "subscriptions").id)
                    if queue.detached:
                        raise detached(self._subscription)
                    batch = self._lease_locked(queue) if self._has_room() and queue.has_ready() else []
                if batch:
                    yield proto.StreamingPullResponse(received_messages=batch)
                else:
                    await self._wakeup.wait()
        finally:
            # The client cancelled, the stream failed or the server stops: nothing must keep waiting.
            self._broker.unwatch(queue, self._wakeup)
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    async def _read(self, requests: AsyncIterator[proto.StreamingPullRequest]) -> None:
        """Apply every later request until the client closes its side or the RPC ends."""
        try:
            async for request in requests:
                self.apply(request)
        except PubSubError as error:
            self._error = error
        except grpc.RpcError:
            pass  # the RPC was cancelled; the response side ends the same way
        finally:
            self._ended = True
            self._wakeup()

    def apply(self, request: proto.StreamingPullRequest) -> None:
        """Acks, deadline changes and a new stream deadline carried by one request (heartbeats carry none)."""
        if request.stream_ack_deadline_seconds:
            policy.check_stream_deadline(request.stream_ack_deadline_seconds)
            self._deadline_s = request.stream_ack_deadline_seconds
        if request.ack_ids:
            self._broker.acknowledge(self._subscription, request.ack_ids)
        if len(request.modify_deadline_ack_ids) != len(request.modify_deadline_seconds):
            raise invalid_argument("modify_deadline_ack_ids and modify_deadline_seconds must have the same length.")
        by_deadline: dict[int, list[str]] = defaultdict(list)
        for ack_id, seconds in zip(request.modify_deadline_ack_ids, request.modify_deadline_seconds, strict=True):
            by_deadline[seconds].append(ack_id)
        for seconds, ack_ids in by_deadline.items():
            self._broker.modify_ack_deadline(self._subscription, ack_ids, seconds)

    def _has_room(self) -> bool:
        return (not self._max_messages or self._owner.messages < self._max_messages) and (
            not self._max_bytes or self._owner.bytes < self._max_bytes)

    def _lease_locked(self, queue: SubscriptionQueue) -> list[proto.ReceivedMessage]:
        room = self._max_messages - self._owner.messages if self._max_messages else MAX_MESSAGES_PER_CALL
        room_bytes = self._max_bytes - self._owner.bytes if self._max_bytes else 0
        return self._broker.lease_locked(queue, min(room, MAX_MESSAGES_PER_CALL), self._deadline_s, self._owner,
                                         room_bytes)
