"""Pub/Sub client construction: Google's endpoint with ambient credentials, or a plain-text emulator."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import google.pubsub_v1 as pubsub_gapic
    from google.cloud import pubsub_v1


def publisher_client(emulator_host: str | None = None) -> pubsub_v1.PublisherClient:
    """A batching publisher for Google Pub/Sub, or for the emulator at ``host:port`` when given."""
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

    if not emulator_host:
        return pubsub_v1.PublisherClient()
    return pubsub_v1.PublisherClient(transport=PublisherGrpcTransport(channel=_insecure_channel(emulator_host)))


def direct_publisher_client(emulator_host: str | None = None) -> pubsub_gapic.PublisherClient:
    """The API's own publisher (one Publish RPC per call, no batching), on Google or the emulator.

    For a caller that waits for every publish (the scheduler acks only after its result is out), the
    batching client only adds its timer, a commit thread per batch and futures.
    """
    from google.pubsub_v1 import PublisherClient
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

    if not emulator_host:
        return PublisherClient()
    return PublisherClient(transport=PublisherGrpcTransport(channel=_insecure_channel(emulator_host)))


def subscriber_client(emulator_host: str | None = None) -> pubsub_v1.SubscriberClient:
    """A subscriber for Google Pub/Sub, or for the emulator at ``host:port`` when given."""
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

    if not emulator_host:
        return pubsub_v1.SubscriberClient()
    return pubsub_v1.SubscriberClient(transport=SubscriberGrpcTransport(channel=_insecure_channel(emulator_host)))


def _insecure_channel(host: str):  # type: ignore[no-untyped-def]
    import grpc

    # An emulator speaks plain gRPC on loopback; the client's own emulator switch does the same.
    return grpc.insecure_channel(host, options=[("grpc.max_receive_message_length", -1)])
