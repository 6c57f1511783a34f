"""The message a dead-letter topic receives: the original data and attributes, plus the attributes the
service adds to say where it came from (documented by Pub/Sub)."""

from __future__ import annotations

from datetime import UTC

from runtime.local.broker import names, proto
from runtime.local.broker.delivery import DeadLetter
from runtime.protocol import contract

ATTR_DELIVERY_COUNT = "CloudPubSubDeadLetterSourceDeliveryCount"
ATTR_SUBSCRIPTION = contract.DEAD_LETTER_SOURCE_SUBSCRIPTION
ATTR_SUBSCRIPTION_PROJECT = contract.DEAD_LETTER_SOURCE_PROJECT
ATTR_PUBLISH_TIME = "CloudPubSubDeadLetterSourceTopicPublishTime"


def dead_letter_message(dead: DeadLetter) -> proto.PubsubMessage:
    """The message to publish on the dead-letter topic (the server assigns its new id and publish time)."""
    source = names.parse(dead.source, "subscriptions")
    forwarded = proto.PubsubMessage(data=dead.message.data, attributes=dead.message.attributes,
                                    ordering_key=dead.message.ordering_key)
    forwarded.attributes[ATTR_DELIVERY_COUNT] = str(dead.delivery_attempt)
    forwarded.attributes[ATTR_SUBSCRIPTION] = source.id
    forwarded.attributes[ATTR_SUBSCRIPTION_PROJECT] = source.project
    forwarded.attributes[ATTR_PUBLISH_TIME] = _service_time(dead.message.publish_time)
    return forwarded


def _service_time(timestamp: proto.Timestamp) -> str:
    """A timestamp as the service writes it in these attributes: 2022-08-12T15:56:29.732+00:00."""
    return timestamp.ToDatetime(tzinfo=UTC).isoformat(timespec="milliseconds")
