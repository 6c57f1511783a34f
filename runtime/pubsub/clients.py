"""Pub/Sub client construction: Google's endpoint with ambient credentials, or a plain-text emulator.

An emulator that takes credentials (the local platform's builtin broker) is given a bearer token, sent as
``authorization: Bearer <token>`` on every call, as Google's APIs take an access token; Google's own emulator
ignores it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import google.pubsub_v1 as pubsub_gapic
    from google.cloud import pubsub_v1


def publisher_client(emulator_host: str | None = None, token: str | None = None) -> pubsub_v1.PublisherClient:
    """A batching publisher for Google Pub/Sub, or for the emulator at ``host:port`` (with ``token``) when given."""
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

    if not emulator_host:
        return pubsub_v1.PublisherClient()
    return pubsub_v1.PublisherClient(
        transport=PublisherGrpcTransport(channel=emulator_channel(emulator_host, token)))


def direct_publisher_client(emulator_host: str | None = None, token: str | None = None) -> pubsub_gapic.PublisherClient:
    """The API's own publisher (one Publish RPC per call, no batching), on Google or the emulator.

    For a caller that waits for every publish (the scheduler acks only after its result is out), the
    batching client only adds its timer, a commit thread per batch and futures.
    """
    from google.pubsub_v1 import PublisherClient
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

    if not emulator_host:
        return PublisherClient()
    return PublisherClient(transport=PublisherGrpcTransport(channel=emulator_channel(emulator_host, token)))


def subscriber_client(emulator_host: str | None = None, token: str | None = None) -> pubsub_v1.SubscriberClient:
    """A subscriber for Google Pub/Sub, or for the emulator at ``host:port`` (with ``token``) when given."""
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

    if not emulator_host:
        return pubsub_v1.SubscriberClient()
    return pubsub_v1.SubscriberClient(
        transport=SubscriberGrpcTransport(channel=emulator_channel(emulator_host, token)))


# A StreamingPull opened while the channel is not connected waits for the connection instead of failing
# at once. google-api-core's ResumableBidiRpc reopens a failed stream at once, at most 5 times per 10 s:
# fast failures against a restarting emulator use those up in milliseconds and stall intake for the
# rest of the 10 s. Worse, a stream that fails before its done-callback is attached is reopened from
# inside open(), and the outer open() then overwrites the new, live stream with the failed one: the live
# stream is left open, unread, holding its flow control's worth of messages until their lease expires.
# Unary RPCs keep failing fast (their retry policies handle that).
_STREAM_SERVICE_CONFIG: Final = json.dumps({"methodConfig": [{
    "name": [{"service": "google.pubsub.v1.Subscriber", "method": "StreamingPull"}],
    "waitForReady": True,
}]})
# Reconnect to a local emulator within this long of it coming back (milliseconds); gRPC's own backoff
# grows from 1 s to 120 s, so a broker down for a few seconds would otherwise be noticed seconds late.
_RECONNECT_BACKOFF_MS: Final = 250
_MAX_RECONNECT_BACKOFF_MS: Final = 1000


def emulator_channel(host: str, token: str | None = None):  # type: ignore[no-untyped-def]
    """A plain-text gRPC channel to the emulator at ``host:port``, sending ``token`` as a bearer token if given."""
    import grpc

    # An emulator speaks plain gRPC on loopback; the client's own emulator switch does the same.
    channel = grpc.insecure_channel(host, options=[
        ("grpc.max_receive_message_length", -1),
        ("grpc.service_config", _STREAM_SERVICE_CONFIG),
        ("grpc.initial_reconnect_backoff_ms", _RECONNECT_BACKOFF_MS),
        ("grpc.min_reconnect_backoff_ms", _RECONNECT_BACKOFF_MS),
        ("grpc.max_reconnect_backoff_ms", _MAX_RECONNECT_BACKOFF_MS),
    ])
    if token is None:
        return channel
    from runtime.pubsub.bearer import BearerToken

    return grpc.intercept_channel(channel, BearerToken(token))
