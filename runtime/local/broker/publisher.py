"""The ``google.pubsub.v1.Publisher`` service: topics and Publish."""

from __future__ import annotations

from typing import Any

import grpc

from runtime.local.broker import access, proto, rpc
from runtime.local.broker.state import Broker


class PublisherService:
    """Translates Publisher RPCs into broker calls."""

    def __init__(self, broker: Broker, policy: access.AccessPolicy | None = None) -> None:
        self._broker = broker
        self._access = policy  # None: every caller may do everything, as on Google's emulator

    def create_topic(self, request: proto.Topic, context: grpc.ServicerContext) -> proto.Topic:
        """CreateTopic."""
        return self._broker.create_topic(request)

    def get_topic(self, request: proto.GetTopicRequest, context: grpc.ServicerContext) -> proto.Topic:
        """GetTopic."""
        return self._broker.get_topic(request.topic)

    def update_topic(self, request: proto.UpdateTopicRequest, context: grpc.ServicerContext) -> proto.Topic:
        """UpdateTopic (labels and retention setting only)."""
        return self._broker.update_topic(request.topic, request.update_mask)

    def delete_topic(self, request: proto.DeleteTopicRequest, context: grpc.ServicerContext) -> proto.Empty:
        """DeleteTopic."""
        self._broker.delete_topic(request.topic)
        return proto.Empty()

    def list_topics(
        self, request: proto.ListTopicsRequest, context: grpc.ServicerContext
    ) -> proto.ListTopicsResponse:
        """ListTopics, paged."""
        topics, token = self._broker.list_topics(request.project, request.page_size, request.page_token)
        return proto.ListTopicsResponse(topics=topics, next_page_token=token)

    def list_topic_subscriptions(
        self, request: proto.ListTopicSubscriptionsRequest, context: grpc.ServicerContext
    ) -> proto.ListTopicSubscriptionsResponse:
        """ListTopicSubscriptions, paged."""
        subscriptions, token = self._broker.list_topic_subscriptions(
            request.topic, request.page_size, request.page_token
        )
        return proto.ListTopicSubscriptionsResponse(subscriptions=subscriptions, next_page_token=token)

    def publish(self, request: proto.PublishRequest, context: grpc.ServicerContext) -> proto.PublishResponse:
        """Publish, within the service's limits."""
        return proto.PublishResponse(message_ids=self._broker.publish(request))

    def detach_subscription(
        self, request: proto.DetachSubscriptionRequest, context: grpc.ServicerContext
    ) -> proto.DetachSubscriptionResponse:
        """DetachSubscription."""
        self._broker.detach_subscription(request.subscription)
        return proto.DetachSubscriptionResponse()

    def handler(self) -> grpc.GenericRpcHandler:
        """The generic handler that serves this service; each answer waits until its change is on disk."""
        unary: dict[str, tuple[Any, type, type]] = {
            "CreateTopic": (self.create_topic, proto.Topic, proto.Topic),
            "GetTopic": (self.get_topic, proto.GetTopicRequest, proto.Topic),
            "UpdateTopic": (self.update_topic, proto.UpdateTopicRequest, proto.Topic),
            "DeleteTopic": (self.delete_topic, proto.DeleteTopicRequest, proto.Empty),
            "ListTopics": (self.list_topics, proto.ListTopicsRequest, proto.ListTopicsResponse),
            "ListTopicSubscriptions": (self.list_topic_subscriptions, proto.ListTopicSubscriptionsRequest,
                                       proto.ListTopicSubscriptionsResponse),
            "Publish": (self.publish, proto.PublishRequest, proto.PublishResponse),
            "DetachSubscription": (self.detach_subscription, proto.DetachSubscriptionRequest,
                                   proto.DetachSubscriptionResponse),
        }
        return grpc.method_handlers_generic_handler(proto.PUBLISHER_SERVICE, {
            method: rpc.unary(*spec, commit=self._broker.flush, guard=access.guard(self._access, method))
            for method, spec in unary.items()})
