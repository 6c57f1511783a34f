"""StreamingPull: one bidirectional stream per subscriber connection.

The first request names the subscription, the stream's ack deadline and its flow control
(max_outstanding_messages / max_outstanding_bytes). A reader thread applies the acks, modacks, deadline
changes and heartbeats of later requests while the response generator leases messages as they become
ready, never holding more than the flow control allows. Messages acked through the unary Acknowledge /
ModifyAckDeadline RPCs (which the Python client uses) free flow-control room just the same, because
the lease, not the stream, is what is counted.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator

import grpc

from runtime.emulator import names, policy, proto
from runtime.emulator.delivery import LeaseOwner, SubscriptionQueue
from runtime.emulator.errors import PubSubError, invalid_argument, not_found, shutting_down
from runtime.emulator.state import MAX_MESSAGES_PER_CALL, Broker


class StreamingPull:
    """The StreamingPull handler: ``handler(requests, context)`` yields StreamingPullResponses."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def __call__(
        self, requests: Iterator[proto.StreamingPullRequest], context: grpc.ServicerContext
    ) -> Iterator[proto.StreamingPullResponse]:
        first = next(requests, None)
        if first is None:
            return
        if not first.subscription:
            raise invalid_argument("The first StreamingPullRequest must name a subscription.")
        policy.check_stream_deadline(first.stream_ack_deadline_seconds)
        session = _Session(self._broker, first.subscription, self._broker.queue(first.subscription),
                           first.stream_ack_deadline_seconds, first.max_outstanding_messages,
                           first.max_outstanding_bytes)
        session.apply(first)
        context.add_callback(session.end)
        reader = threading.Thread(target=session.read, args=(requests,), name="pubsub-emulator-stream-reader",
                                  daemon=True)
        reader.start()
        yield from session.responses()


class _Session:
    """The state of one open stream."""

    def __init__(self, broker: Broker, subscription: str, queue: SubscriptionQueue, deadline_s: int,
                 max_messages: int, max_bytes: int) -> None:
        self._broker = broker
        self._subscription = subscription
        self._queue = queue
        self._deadline_s = deadline_s
        self._max_messages = max_messages  # 0: no limit
        self._max_bytes = max_bytes  # 0: no limit
        self._owner = LeaseOwner()
        self._ended = False
        self._error: PubSubError | None = None

    def end(self, error: PubSubError | None = None) -> None:
        """Close the stream (client gone, cancelled, or a bad request); wakes the response generator."""
        with self._queue.cond:
            self._ended = True
            self._error = self._error or error
            self._queue.cond.notify_all()

    def read(self, requests: Iterator[proto.StreamingPullRequest]) -> None:
        """Apply every later request until the client closes its side or the RPC ends."""
        try:
            for request in requests:
                self.apply(request)
        except PubSubError as error:
            self.end(error)
        except grpc.RpcError:
            pass  # the RPC was cancelled; the response side sees the same through end()
        finally:
            self.end()

    def apply(self, request: proto.StreamingPullRequest) -> None:
        """Acks, deadline changes and a new stream deadline carried by one request (heartbeats carry none)."""
        if request.stream_ack_deadline_seconds:
            policy.check_stream_deadline(request.stream_ack_deadline_seconds)
            with self._queue.cond:
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

    def responses(self) -> Iterator[proto.StreamingPullResponse]:
        """Lease and send messages as they become ready, within the stream's flow control."""
        cond = self._queue.cond
        while True:
            with cond:
                cond.wait_for(self._should_wake)
                if self._broker.closed:
                    raise shutting_down()
                if self._error is not None:
                    raise self._error
                if self._ended:
                    return
                if self._queue.closed:
                    raise not_found(names.parse(self._subscription, "subscriptions").id)
                room = self._max_messages - self._owner.messages if self._max_messages else MAX_MESSAGES_PER_CALL
                room_bytes = self._max_bytes - self._owner.bytes if self._max_bytes else 0
                batch = self._broker.lease_locked(self._queue, min(room, MAX_MESSAGES_PER_CALL), self._deadline_s,
                                                  self._owner, room_bytes)
            yield proto.StreamingPullResponse(received_messages=batch)

    def _should_wake(self) -> bool:
        if self._ended or self._queue.closed or self._broker.closed:
            return True
        has_room = (not self._max_messages or self._owner.messages < self._max_messages) and (
            not self._max_bytes or self._owner.bytes < self._max_bytes)
        return has_room and self._queue.has_ready()
