"""A dead-lettered job request as the DLQ tools show it."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Final

from pydantic import BaseModel, Field

from runtime.protocol.contract import DEAD_LETTER_SOURCE_SUBSCRIPTION
from runtime.protocol.queues import DEFAULT_QUEUE, queue_name_of_subscription

# Attributes real Pub/Sub adds when it dead-letters a message; a replay must not carry them forward.
DEAD_LETTER_ATTRIBUTE_PREFIX: Final = "CloudPubSubDeadLetter"
PREVIEW_CHARS: Final = 200  # enough of a body to recognise the job in a listing


class DeadLetter(BaseModel):
    """One message on the dead-letter subscription."""

    message_id: str
    job_id: str | None = None
    type: str | None = None
    publish_time: datetime | None = None
    delivery_attempt: int | None = Field(None, description="Deliveries on the DLQ subscription itself.")
    attributes: dict[str, str] = {}
    data: str = Field(description="The body as text (undecodable bytes replaced).")
    size: int

    def preview(self) -> str:
        """A short, single-line view of the body."""
        flat = " ".join(self.data.split())
        return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS] + "…"

    def source_queue(self) -> str:
        """The request queue this letter was dead-lettered from, by its source subscription (Pub/Sub's
        ``CloudPubSubDeadLetterSourceSubscription``); the default queue for a letter without one (published to the
        dead-letter topic by hand). ``QueueError`` when the source is no request queue's subscription."""
        source = self.attributes.get(DEAD_LETTER_SOURCE_SUBSCRIPTION)
        return DEFAULT_QUEUE if source is None else queue_name_of_subscription(source)

    def replay_attributes(self) -> dict[str, str]:
        """The original attributes, without those Pub/Sub added when it dead-lettered the message."""
        return {k: v for k, v in self.attributes.items() if not k.startswith(DEAD_LETTER_ATTRIBUTE_PREFIX)}


def from_received(received: Any) -> DeadLetter:
    """Build a ``DeadLetter`` from a ``ReceivedMessage`` of a synchronous pull."""
    message = received.message
    data = bytes(message.data)
    attributes = dict(message.attributes)
    body = _json_object(data)
    publish_time = message.publish_time
    return DeadLetter(
        message_id=message.message_id,
        job_id=attributes.get("job_id") or _str(body.get("job_id")),
        type=attributes.get("type") or _str(body.get("type")),
        publish_time=publish_time if isinstance(publish_time, datetime) else None,
        delivery_attempt=received.delivery_attempt or None,
        attributes=attributes,
        data=data.decode(errors="replace"),
        size=len(data),
    )


def _json_object(data: bytes) -> dict[str, Any]:
    try:
        body = json.loads(data)
    except ValueError:
        return {}  # not JSON: a message the scheduler rejected; its attributes may still name the job
    return body if isinstance(body, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
