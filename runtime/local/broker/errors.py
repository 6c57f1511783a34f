"""Errors the emulator answers with: a gRPC status code and a message worded like the real service's."""

from __future__ import annotations

import grpc


class PubSubError(Exception):
    """A request the service refuses; the gRPC layer turns it into the status ``code``."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def not_found(resource_id: str) -> PubSubError:
    """The named topic, subscription or snapshot does not exist."""
    return PubSubError(grpc.StatusCode.NOT_FOUND, f"Resource not found (resource={resource_id}).")


def already_exists(resource_id: str) -> PubSubError:
    """A create request names a resource that already exists."""
    message = f"Resource already exists in the project (resource={resource_id})."
    return PubSubError(grpc.StatusCode.ALREADY_EXISTS, message)


def invalid_argument(message: str) -> PubSubError:
    """The request is malformed or a value is out of range."""
    return PubSubError(grpc.StatusCode.INVALID_ARGUMENT, message)


def failed_precondition(message: str) -> PubSubError:
    """The resource is not in a state that allows the request."""
    return PubSubError(grpc.StatusCode.FAILED_PRECONDITION, message)


def detached(subscription_name: str) -> PubSubError:
    """Pull or StreamingPull on a detached subscription."""
    return failed_precondition(f"Subscription {subscription_name} is detached from its topic.")


def unimplemented(feature: str) -> PubSubError:
    """A real Pub/Sub feature this emulator deliberately does not provide (see docs/emulator.md)."""
    return PubSubError(grpc.StatusCode.UNIMPLEMENTED, f"The GPU Runtime Pub/Sub emulator does not support {feature}.")


def storage_failed(path: str, reason: str) -> PubSubError:
    """The durable broker could not commit a change to its data file; the change may not survive a restart."""
    return PubSubError(grpc.StatusCode.UNAVAILABLE,
                       f"The Pub/Sub emulator cannot write its data file {path} ({reason}); the change may be lost.")


def shutting_down() -> PubSubError:
    """The emulator is stopping; clients treat UNAVAILABLE as retryable."""
    return PubSubError(grpc.StatusCode.UNAVAILABLE, "The Pub/Sub emulator is shutting down.")
