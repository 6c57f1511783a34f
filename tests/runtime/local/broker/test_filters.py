"""Subscription filters through the real client: only matching messages are delivered; the rest are
acknowledged for the subscription. The grammar and its corner cases (``!=`` matches a missing attribute;
AND and OR mix only with parentheses) are the service's documented ones: the official emulator cannot
settle them, since it ignores filters."""

from __future__ import annotations

import pytest
from google.api_core import exceptions

from tests.runtime.local.broker import ON_THE_OFFICIAL_EMULATOR
from tests.runtime.local.broker.conftest import PubSub

pytestmark = [pytest.mark.integration, ON_THE_OFFICIAL_EMULATOR]

# (attributes of a message, its data) published to every filtered subscription below
MESSAGES = [
    ({"type": "noop", "pool": "gpu-a100"}, b"m1"),
    ({"type": "european_option", "pool": "gpu-t4"}, b"m2"),
    ({"type": "noop"}, b"m3"),
    ({}, b"m4"),
]
FILTERS = {
    'attributes.type = "noop"': [b"m1", b"m3"],
    'attributes.type != "noop"': [b"m2", b"m4"],  # a missing attribute is "not equal"
    "attributes:pool": [b"m1", b"m2"],
    "NOT attributes:pool": [b"m3", b"m4"],
    'hasPrefix(attributes.pool, "gpu-a")': [b"m1"],
    'attributes.type = "noop" AND attributes:pool': [b"m1"],
    '(attributes.type = "noop" AND attributes:pool) OR attributes.pool = "gpu-t4"': [b"m1", b"m2"],
    '-attributes:type': [b"m4"],
}


IGNORES_FILTERS = "it stores a subscription's filter but ignores it: every message is delivered, any text accepted"


@pytest.mark.official_differs(IGNORES_FILTERS)
def test_a_filtered_subscription_gets_only_matching_messages(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    subs = {text: pubsub.subscription(f"filtered-{i}", topic, filter=text) for i, text in enumerate(FILTERS)}
    assert pubsub.subscriber.get_subscription(subscription=subs["attributes:pool"]).filter == "attributes:pool"
    for attributes, data in MESSAGES:
        pubsub.publish(topic, data, **attributes)
    for text, expected in FILTERS.items():
        received = pubsub.pull_within(subs[text], 5, want=len(expected))
        received += pubsub.pull_within(subs[text], 0.2)  # and nothing more
        assert sorted(m.message.data for m in received) == expected, text


@pytest.mark.parametrize("text", [
    'attributes.type = noop',  # unquoted value
    'attributes.type = "a" AND attributes.x = "b" OR attributes:y',  # AND and OR mixed without parentheses
    'attributes.type = "a" AND',
    'data = "x"',
    'attributes:' + "k" * 300,  # longer than the service's 256 bytes
])
@pytest.mark.official_differs(IGNORES_FILTERS)
def test_a_malformed_filter_is_refused(pubsub: PubSub, text: str) -> None:
    topic = pubsub.topic("requests")
    with pytest.raises(exceptions.InvalidArgument):
        pubsub.subscription("filtered", topic, filter=text)


# Each filter's string uses escapes; the value it must match, decoded, and an attribute that would match
# only if the escape were read literally.
ESCAPED = {
    r'attributes.k = "\x41"': ("A", "x41"),
    r'attributes.k = "\102"': ("B", "102"),
    r'attributes.k = "\u00e9t\u00e9"': ("été", "u00e9tu00e9"),
    r'attributes.k = "say \"hi\"\n"': ('say "hi"\n', 'say "hi"n'),
    r'attributes.k = "tab\tand\\"': ("tab\tand\\", "tabtand\\"),
    r'hasPrefix(attributes.k, "\U0001F600")': ("\U0001F600 smile", "U0001F600 smile"),
}


@pytest.mark.official_differs(IGNORES_FILTERS)
def test_escapes_in_filter_strings_are_decoded(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    subs = {text: pubsub.subscription(f"escaped-{i}", topic, filter=text) for i, text in enumerate(ESCAPED)}
    for decoded, literal in ESCAPED.values():
        pubsub.publish(topic, decoded.encode(), k=decoded)
        pubsub.publish(topic, literal.encode(), k=literal)
    for text, (decoded, _) in ESCAPED.items():
        received = pubsub.pull_within(subs[text], 5) + pubsub.pull_within(subs[text], 0.2)
        assert [m.message.data.decode() for m in received] == [decoded], text


@pytest.mark.parametrize("text", [r'attributes.k = "\q"', r'attributes.k = "\x4"', r'attributes.k = "\uD800"'])
@pytest.mark.official_differs(IGNORES_FILTERS)
def test_a_filter_with_a_bad_escape_is_refused(pubsub: PubSub, text: str) -> None:
    with pytest.raises(exceptions.InvalidArgument, match=r"escape|not a character"):
        pubsub.subscription("filtered", pubsub.topic("requests"), filter=text)


@pytest.mark.official_differs(IGNORES_FILTERS)
def test_seek_to_a_snapshot_honours_the_filter(pubsub: PubSub) -> None:
    topic = pubsub.topic("requests")
    sub = pubsub.subscription("gpu-only", topic, filter='attributes.pool = "gpu"')
    pubsub.publish(topic, b"gpu-1", pool="gpu")
    pubsub.publish(topic, b"cpu-1", pool="cpu")
    snapshot = pubsub.subscriber.snapshot_path(pubsub.project, "before")
    pubsub.subscriber.create_snapshot(request={"name": snapshot, "subscription": sub})
    pubsub.publish(topic, b"gpu-2", pool="gpu")  # after the snapshot: it keeps every message of its topic
    pubsub.publish(topic, b"cpu-2", pool="cpu")
    received = pubsub.pull_within(sub, 5, want=2)
    pubsub.subscriber.acknowledge(subscription=sub, ack_ids=[m.ack_id for m in received])

    pubsub.subscriber.seek(request={"subscription": sub, "snapshot": snapshot})
    again = pubsub.pull_within(sub, 5, want=2) + pubsub.pull_within(sub, 0.5, want=2)
    assert sorted(m.message.data for m in again) == [b"gpu-1", b"gpu-2"]
