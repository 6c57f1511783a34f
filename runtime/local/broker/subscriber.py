"""The ``google.pubsub.v1.Subscriber`` service: subscriptions, Pull, Acknowledge, ModifyAckDeadline, Seek,
and StreamingPull (delegated to runtime.local.broker.streaming)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from runtime.local.broker import access, proto, rpc
from runtime.local.broker.errors import invalid_argument
from runtime.local.broker.state import Broker
from runtime.local.broker.streaming import StreamingPull
from runtime.local.broker.waiting import Wakeup

# A unary pull without return_immediately waits for messages at most this long (real seconds), and
# answers this much before the caller's deadline so the caller gets an empty response, not an error.
MAX_PULL_WAIT_S = 10.0
PULL_DEADLINE_MARGIN_S = 0.2


class SubscriberService:
    """Translates Subscriber RPCs into broker calls."""

    def __init__(self, broker: Broker, policy: access.AccessPolicy | None = None) -> None:
        self._broker = broker
        self._access = policy  # None: every caller may do everything, as on Google's emulator
        self._streaming = StreamingPull(broker)

    def create_subscription(self, request: proto.Subscription, context: grpc.ServicerContext) -> proto.Subscription:
        """CreateSubscription."""
        return self._broker.create_subscription(request)

    def get_subscription(
        self, request: proto.GetSubscriptionRequest, context: grpc.ServicerContext
    ) -> proto.Subscription:
        """GetSubscription."""
        return self._broker.get_subscription(request.subscription)

    def update_subscription(
        self, request: proto.UpdateSubscriptionRequest, context: grpc.ServicerContext
    ) -> proto.Subscription:
        """UpdateSubscription."""
        return self._broker.update_subscription(request.subscription, request.update_mask)

    def delete_subscription(
        self, request: proto.DeleteSubscriptionRequest, context: grpc.ServicerContext
    ) -> proto.Empty:
        """DeleteSubscription."""
        self._broker.delete_subscription(request.subscription)
        return proto.Empty()

    def list_subscriptions(
        self, request: proto.ListSubscriptionsRequest, context: grpc.ServicerContext
    ) -> proto.ListSubscriptionsResponse:
        """ListSubscriptions, paged."""
        subscriptions, token = self._broker.list_subscriptions(request.project, request.page_size, request.page_token)
        return proto.ListSubscriptionsResponse(subscriptions=subscriptions, next_page_token=token)

    async def pull(self, request: proto.PullRequest, context: grpc.aio.ServicerContext) -> proto.PullResponse:
        """Pull: waits for the first message unless return_immediately is set (on the loop, holding no thread)."""
        wait_s = 0.0
        if not request.return_immediately:
            remaining = context.time_remaining()
            wait_s = MAX_PULL_WAIT_S if remaining is None else min(MAX_PULL_WAIT_S, remaining - PULL_DEADLINE_MARGIN_S)
        return await self.pull_within(request, wait_s)

    async def pull_within(self, request: proto.PullRequest, wait_s: float) -> proto.PullResponse:
        """Lease what is ready, waiting up to ``wait_s`` seconds for a first message (also the REST pull)."""
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + wait_s
        wakeup = Wakeup()
        queue = self._broker.watch(request.subscription, wakeup)
        try:
            while True:
                wakeup.clear()
                received = self._broker.pull(request.subscription, request.max_messages)
                left = give_up_at - loop.time()
                if received or left <= 0:
                    return proto.PullResponse(received_messages=received)
                await wakeup.wait(left)
        finally:
            self._broker.unwatch(queue, wakeup)

    def acknowledge(self, request: proto.AcknowledgeRequest, context: grpc.ServicerContext) -> proto.Empty:
        """Acknowledge."""
        if not request.ack_ids:
            raise invalid_argument("No ack ids were given.")
        self._broker.acknowledge(request.subscription, request.ack_ids)
        return proto.Empty()

    def modify_ack_deadline(
        self, request: proto.ModifyAckDeadlineRequest, context: grpc.ServicerContext
    ) -> proto.Empty:
        """ModifyAckDeadline; a deadline of 0 nacks."""
        if not request.ack_ids:
            raise invalid_argument("No ack ids were given.")
        self._broker.modify_ack_deadline(request.subscription, request.ack_ids, request.ack_deadline_seconds)
        return proto.Empty()

    def seek(self, request: proto.SeekRequest, context: grpc.ServicerContext) -> proto.SeekResponse:
        """Seek to a time or to a snapshot."""
        target = request.WhichOneof("target")
        if target == "snapshot":
            self._broker.seek_to_snapshot(request.subscription, request.snapshot)
        elif target == "time":
            self._broker.seek_to_time(request.subscription, request.time.ToNanoseconds() / 1e9)
        else:
            raise invalid_argument("A seek request needs a time or a snapshot.")
        return proto.SeekResponse()

    def create_snapshot(self, request: proto.CreateSnapshotRequest, context: grpc.ServicerContext) -> proto.Snapshot:
        """CreateSnapshot."""
        return self._broker.create_snapshot(request)

    def get_snapshot(self, request: proto.GetSnapshotRequest, context: grpc.ServicerContext) -> proto.Snapshot:
        """GetSnapshot."""
        return self._broker.get_snapshot(request.snapshot)

    def update_snapshot(self, request: proto.UpdateSnapshotRequest, context: grpc.ServicerContext) -> proto.Snapshot:
        """UpdateSnapshot (labels, expiry time)."""
        return self._broker.update_snapshot(request.snapshot, request.update_mask)

    def delete_snapshot(self, request: proto.DeleteSnapshotRequest, context: grpc.ServicerContext) -> proto.Empty:
        """DeleteSnapshot."""
        self._broker.delete_snapshot(request.snapshot)
        return proto.Empty()

    def list_snapshots(
        self, request: proto.ListSnapshotsRequest, context: grpc.ServicerContext
    ) -> proto.ListSnapshotsResponse:
        """ListSnapshots, paged."""
        snapshots, token = self._broker.list_snapshots(request.project, request.page_size, request.page_token)
        return proto.ListSnapshotsResponse(snapshots=snapshots, next_page_token=token)

    def handler(self) -> grpc.GenericRpcHandler:
        """The generic handler that serves this service. Each plain RPC's answer waits until its change is on
        disk; Pull and StreamingPull, on the event loop, do not wait for the delivery attempts they record
        (the next answered RPC, or the journal's writer a moment later, commits them)."""
        unary: dict[str, tuple[Any, type, type]] = {
            "CreateSubscription": (self.create_subscription, proto.Subscription, proto.Subscription),
            "GetSubscription": (self.get_subscription, proto.GetSubscriptionRequest, proto.Subscription),
            "UpdateSubscription": (self.update_subscription, proto.UpdateSubscriptionRequest, proto.Subscription),
            "DeleteSubscription": (self.delete_subscription, proto.DeleteSubscriptionRequest, proto.Empty),
            "ListSubscriptions": (self.list_subscriptions, proto.ListSubscriptionsRequest,
                                  proto.ListSubscriptionsResponse),
            "Pull": (self.pull, proto.PullRequest, proto.PullResponse),
            "Acknowledge": (self.acknowledge, proto.AcknowledgeRequest, proto.Empty),
            "ModifyAckDeadline": (self.modify_ack_deadline, proto.ModifyAckDeadlineRequest, proto.Empty),
            "Seek": (self.seek, proto.SeekRequest, proto.SeekResponse),
            "CreateSnapshot": (self.create_snapshot, proto.CreateSnapshotRequest, proto.Snapshot),
            "GetSnapshot": (self.get_snapshot, proto.GetSnapshotRequest, proto.Snapshot),
            "UpdateSnapshot": (self.update_snapshot, proto.UpdateSnapshotRequest, proto.Snapshot),
            "DeleteSnapshot": (self.delete_snapshot, proto.DeleteSnapshotRequest, proto.Empty),
            "ListSnapshots": (self.list_snapshots, proto.ListSnapshotsRequest, proto.ListSnapshotsResponse),
        }
        return grpc.method_handlers_generic_handler(proto.SUBSCRIBER_SERVICE, {
            **{method: rpc.unary(*spec, commit=self._broker.flush, guard=access.guard(self._access, method))
               for method, spec in unary.items()},
            "StreamingPull": rpc.bidi(self._streaming, proto.StreamingPullRequest, proto.StreamingPullResponse,
                                      guard=access.guard(self._access, "StreamingPull")),
        })
