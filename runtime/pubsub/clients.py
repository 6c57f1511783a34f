"""Pub/Sub client construction: Google's endpoint with ambient credentials, or a plain-text emulator."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from google.cloud import pubsub_v1


def publisher_client(emulator_host: str | None = None,
                     batch_latency_s: float | None = None) -> pubsub_v1.PublisherClient:
    """A publisher for Google Pub/Sub, or for the emulator at ``host:port`` when given.

    ``batch_latency_s`` replaces the client's 10 ms batching delay: a caller that waits for each
    publish (the scheduler acks only after its result is out) gains nothing from batching.
    """
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

    options: dict[str, object] = {}
    if batch_latency_s is not None:
        options["batch_settings"] = pubsub_v1.types.BatchSettings(max_latency=batch_latency_s)
    if not emulator_host:
        return pubsub_v1.PublisherClient(**options)
    transport = PublisherGrpcTransport(channel=_insecure_channel(emulator_host))
    return pubsub_v1.PublisherClient(transport=transport, **options)


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
