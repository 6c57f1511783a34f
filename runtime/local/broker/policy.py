"""Subscription settings: the service's defaults and limits, validated once, turned into a DeliveryPolicy."""

from __future__ import annotations

from runtime.local.broker import expiry, proto
from runtime.local.broker.delivery import DeliveryPolicy
from runtime.local.broker.errors import invalid_argument, unimplemented

# Pub/Sub's documented limits (seconds unless named otherwise).
DEFAULT_ACK_DEADLINE_S = 10  # used when a subscription asks for 0
ACK_DEADLINE_RANGE_S = (10, 600)
MODIFY_DEADLINE_RANGE_S = (0, 600)  # 0 means nack
DEFAULT_RETENTION_S = 7 * 24 * 3600
RETENTION_RANGE_S = (600, 31 * 24 * 3600)
DEFAULT_MAX_DELIVERY_ATTEMPTS = 5
DELIVERY_ATTEMPTS_RANGE = (5, 100)
DEFAULT_MIN_BACKOFF_S = 10
DEFAULT_MAX_BACKOFF_S = 600
BACKOFF_RANGE_S = (0, 600)

# Fields UpdateSubscription may change; the rest are fixed at creation, as on the real service. Those naming
# a feature the emulator refuses (push, export subscriptions, exactly-once, transforms) pass the mask and
# are then refused by ``normalize`` with UNIMPLEMENTED naming the feature, as at creation; setting them
# to off (``enable_exactly_once_delivery: false``) is accepted, since that is what the emulator does.
UPDATABLE_SUBSCRIPTION_FIELDS = frozenset({
    "ack_deadline_seconds", "retain_acked_messages", "message_retention_duration", "labels",
    "dead_letter_policy", "retry_policy", "expiration_policy", "push_config", "bigquery_config",
    "cloud_storage_config", "bigtable_config", "enable_exactly_once_delivery", "message_transforms",
})
# Likewise for UpdateTopic: kms_key_name and message_storage_policy are stored without local effect, as at
# creation; schemas, import settings and transforms are refused by ``refuse_unsupported_topic``.
UPDATABLE_TOPIC_FIELDS = frozenset({
    "labels", "message_retention_duration", "kms_key_name", "message_storage_policy", "schema_settings",
    "ingestion_data_source_settings", "message_transforms",
})


def _check_range(field: str, value: float, bounds: tuple[float, float]) -> None:
    low, high = bounds
    if not low <= value <= high:
        raise invalid_argument(f"The value for {field} is out of range: {value:g}. Valid range is [{low}, {high}].")


def check_modify_deadline(seconds: int) -> None:
    """Refuse a ModifyAckDeadline value outside 0..600 s."""
    _check_range("ack_deadline_seconds", seconds, MODIFY_DEADLINE_RANGE_S)


def check_stream_deadline(seconds: int) -> None:
    """Refuse a streaming pull's stream_ack_deadline_seconds outside 10..600 s."""
    _check_range("stream_ack_deadline_seconds", seconds, ACK_DEADLINE_RANGE_S)


def normalize(subscription: proto.Subscription) -> None:
    """Fill in the service's defaults and validate, in place; raise PubSubError for what is refused."""
    _refuse_unsupported(subscription)
    if subscription.ack_deadline_seconds == 0:
        subscription.ack_deadline_seconds = DEFAULT_ACK_DEADLINE_S
    _check_range("ack_deadline_seconds", subscription.ack_deadline_seconds, ACK_DEADLINE_RANGE_S)
    if not subscription.HasField("message_retention_duration"):
        subscription.message_retention_duration.FromSeconds(DEFAULT_RETENTION_S)
    retention_s = subscription.message_retention_duration.ToNanoseconds() / 1e9
    _check_range("message_retention_duration", retention_s, RETENTION_RANGE_S)
    ttl = expiry.ttl_s(subscription)
    if ttl is not None and ttl < expiry.MIN_TTL_S:
        raise invalid_argument(f"Invalid expiration_policy.ttl: {ttl:g} s. The minimum is 1 day.")
    if subscription.HasField("dead_letter_policy"):
        dead_letter = subscription.dead_letter_policy
        if not dead_letter.dead_letter_topic:
            raise invalid_argument("A dead letter policy requires a dead_letter_topic.")
        if dead_letter.max_delivery_attempts == 0:
            dead_letter.max_delivery_attempts = DEFAULT_MAX_DELIVERY_ATTEMPTS
        _check_range("max_delivery_attempts", dead_letter.max_delivery_attempts, DELIVERY_ATTEMPTS_RANGE)
    if subscription.HasField("retry_policy"):
        retry = subscription.retry_policy
        if not retry.HasField("minimum_backoff"):
            retry.minimum_backoff.FromSeconds(DEFAULT_MIN_BACKOFF_S)
        if not retry.HasField("maximum_backoff"):
            retry.maximum_backoff.FromSeconds(DEFAULT_MAX_BACKOFF_S)
        low, high = (d.ToNanoseconds() / 1e9 for d in (retry.minimum_backoff, retry.maximum_backoff))
        _check_range("minimum_backoff", low, BACKOFF_RANGE_S)
        _check_range("maximum_backoff", high, BACKOFF_RANGE_S)
        if low > high:
            raise invalid_argument("minimum_backoff must not be greater than maximum_backoff.")


def _refuse_unsupported(subscription: proto.Subscription) -> None:
    """Features whose semantics the emulator does not provide are refused, never silently ignored."""
    unsupported: list[tuple[bool, str]] = [
        (bool(subscription.push_config.push_endpoint), "push subscriptions"),
        (subscription.HasField("bigquery_config"), "BigQuery subscriptions"),
        (subscription.HasField("cloud_storage_config"), "Cloud Storage subscriptions"),
        (subscription.enable_exactly_once_delivery, "exactly-once delivery"),
        (subscription.HasField("bigtable_config"), "Bigtable subscriptions"),
        (bool(subscription.message_transforms), "message transforms (single message transforms)"),
    ]
    _refuse(unsupported)


def refuse_unsupported_topic(topic: proto.Topic) -> None:
    """Topic settings that would change what publishers or subscribers see are refused, never ignored."""
    _refuse([
        (topic.HasField("schema_settings"), "schemas (topic schema_settings)"),
        (topic.HasField("ingestion_data_source_settings"), "import topics (ingestion_data_source_settings)"),
        (bool(topic.message_transforms), "message transforms (single message transforms)"),
    ])


def _refuse(unsupported: list[tuple[bool, str]]) -> None:
    for refused, feature in unsupported:
        if refused:
            raise unimplemented(feature)


def topic_retention_s(topic: proto.Topic) -> float | None:
    """A topic's message retention in seconds (validated: 10 minutes to 31 days), or None when it has none."""
    if not topic.HasField("message_retention_duration"):
        return None
    retention_s = topic.message_retention_duration.ToNanoseconds() / 1e9
    _check_range("message_retention_duration", retention_s, RETENTION_RANGE_S)
    return retention_s


def delivery_policy(subscription: proto.Subscription) -> DeliveryPolicy:
    """The delivery settings of a normalized subscription."""
    dead_letter = subscription.dead_letter_policy if subscription.HasField("dead_letter_policy") else None
    retry = subscription.retry_policy if subscription.HasField("retry_policy") else None
    return DeliveryPolicy(
        ack_deadline_s=subscription.ack_deadline_seconds,
        retention_s=subscription.message_retention_duration.ToNanoseconds() / 1e9,
        retain_acked=subscription.retain_acked_messages,
        dead_letter_topic=dead_letter.dead_letter_topic if dead_letter else None,
        max_delivery_attempts=dead_letter.max_delivery_attempts if dead_letter else None,
        min_backoff_s=retry.minimum_backoff.ToNanoseconds() / 1e9 if retry else None,
        max_backoff_s=retry.maximum_backoff.ToNanoseconds() / 1e9 if retry else None,
        ordered=subscription.enable_message_ordering,
    )


def check_update_mask(paths: list[str], allowed: frozenset[str], kind: str) -> None:
    """Refuse an empty update mask or one naming a field that cannot change."""
    if not paths:
        raise invalid_argument("The update_mask in the Update" + kind + "Request must be set.")
    bad = sorted(set(paths) - allowed)
    if bad:
        raise invalid_argument(f"Invalid update_mask provided in the Update{kind}Request: "
                               f"{', '.join(bad)} cannot be updated.")
