"""Pub/Sub's documented publish limits, refused with the service's code (INVALID_ARGUMENT).

The official emulator enforces only the message count; the service enforces all of these, so an app
that passes here will not meet them first in the cloud.
"""

from __future__ import annotations

from typing import Final

from runtime.local.broker import proto
from runtime.local.broker.errors import invalid_argument

MAX_MESSAGES_PER_CALL: Final = 1000  # per Publish request, and per Pull / StreamingPull response
# A Publish request's serialized size: "10 MB" in the service's quotas (https://cloud.google.com/pubsub/quotas),
# 10,000,000 bytes as the client library counts it (its _SERVER_PUBLISH_MAX_BYTES, where it splits batches).
MAX_PUBLISH_REQUEST_BYTES: Final = 10_000_000
MAX_ATTRIBUTES: Final = 100
MAX_ATTRIBUTE_KEY_BYTES: Final = 256
MAX_ATTRIBUTE_VALUE_BYTES: Final = 1024
MAX_ORDERING_KEY_BYTES: Final = 1024
RESERVED_ATTRIBUTE_PREFIX: Final = "goog"


def check_publish(request: proto.PublishRequest) -> None:
    """Refuse a Publish request over the service's limits, or one with an empty or malformed message."""
    if not request.messages:
        raise invalid_argument("The request must contain at least one message.")
    if len(request.messages) > MAX_MESSAGES_PER_CALL:
        raise invalid_argument(f"The request contains more than {MAX_MESSAGES_PER_CALL} messages.")
    check_request_bytes(request.ByteSize())
    for message in request.messages:
        _check_message(message)


def check_request_bytes(size: int) -> None:
    """Refuse a request of ``size`` serialized bytes over the service's 10 MB request limit.

    The gRPC layer asks this of every request's raw bytes before parsing them (runtime.local.broker.rpc), so a
    request of any size is refused with INVALID_ARGUMENT, which no client retries, and is never parsed.
    """
    if size > MAX_PUBLISH_REQUEST_BYTES:
        raise invalid_argument(f"Request payload size exceeds the limit: {MAX_PUBLISH_REQUEST_BYTES} bytes "
                               f"(this request has {size}).")


def _check_message(message: proto.PubsubMessage) -> None:
    if not message.data and not message.attributes:
        raise invalid_argument("Some messages contain neither data nor attributes; a message needs at least one.")
    if len(message.attributes) > MAX_ATTRIBUTES:
        raise invalid_argument(f"A message has {len(message.attributes)} attributes; at most {MAX_ATTRIBUTES} "
                               "are allowed.")
    for key, value in message.attributes.items():
        if not key or key.startswith(RESERVED_ATTRIBUTE_PREFIX):
            raise invalid_argument(f"The attribute key '{key}' is not allowed.")
        _check_length("attribute key", key, MAX_ATTRIBUTE_KEY_BYTES)
        _check_length(f"value of attribute '{key}'", value, MAX_ATTRIBUTE_VALUE_BYTES)
    _check_length("ordering_key", message.ordering_key, MAX_ORDERING_KEY_BYTES)


def _check_length(what: str, text: str, limit: int) -> None:
    size = len(text.encode())
    if size > limit:
        raise invalid_argument(f"The {what} is {size} bytes long; at most {limit} bytes are allowed.")
