"""The REST (v1 JSON) surface through a real REST client, gcloud-aio-pubsub, and the ``GET /`` readiness
answer. The official emulator serves REST on its gRPC port; the builtin on a port of its own."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import aiohttp
import pytest
from gcloud.aio.pubsub import PublisherClient, PubsubMessage, SubscriberClient

from tests.runtime.local.broker import ON_THE_OFFICIAL_EMULATOR
from tests.runtime.local.broker.conftest import PubSub

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60), ON_THE_OFFICIAL_EMULATOR]
HTTP_TIMEOUT_S = 10


def test_get_root_answers_ok_like_the_official_emulator(pubsub: PubSub) -> None:
    with urllib.request.urlopen(pubsub.rest_root.removesuffix("/v1") + "/", timeout=HTTP_TIMEOUT_S) as response:
        assert (response.status, response.read().strip()) == (200, b"Ok")


async def _round_trip(pubsub: PubSub) -> dict:
    topic = pubsub.publisher.topic_path(pubsub.project, "rest-requests")
    subscription = pubsub.subscription_path("rest-requests-sub")
    async with aiohttp.ClientSession() as session:
        publisher = PublisherClient(session=session, api_root=pubsub.rest_root)
        subscriber = SubscriberClient(session=session, api_root=pubsub.rest_root)
        created = await publisher.create_topic(topic)
        await subscriber.create_subscription(subscription, topic, {"ackDeadlineSeconds": 60})
        published = await publisher.publish(topic, [PubsubMessage(b'{"job_id": "r1"}', job_id="r1"),
                                                    PubsubMessage(b"second")])
        pulled = await subscriber.pull(subscription, max_messages=2)
        while len(pulled) < 2:
            pulled += await subscriber.pull(subscription, max_messages=2 - len(pulled))
        first = next(m for m in pulled if m.attributes.get("job_id") == "r1")
        other = next(m for m in pulled if m is not first)
        await subscriber.acknowledge(subscription, [first.ack_id])
        await subscriber.modify_ack_deadline(subscription, [other.ack_id], 0)  # a nack: redelivered at once
        again = await subscriber.pull(subscription, max_messages=1)
        await subscriber.acknowledge(subscription, [again[0].ack_id])
        return {"created": created["name"], "ids": published["messageIds"], "data": first.data,
                "again": again[0].message_id, "other": other.message_id,
                "topics": [t["name"] for t in (await publisher.list_topics(f"projects/{pubsub.project}"))["topics"]]}


def test_gcloud_aio_pubsub_publishes_pulls_acks_and_nacks(pubsub: PubSub) -> None:
    got = asyncio.run(asyncio.wait_for(_round_trip(pubsub), 40))
    topic = pubsub.publisher.topic_path(pubsub.project, "rest-requests")
    assert got["created"] == topic and got["topics"] == [topic]
    assert len(got["ids"]) == 2 and got["data"] == b'{"job_id": "r1"}'
    assert got["again"] == got["other"]
    # What the REST client published, the gRPC client sees too: the same broker.
    assert pubsub.subscriber.get_subscription(subscription=pubsub.subscription_path("rest-requests-sub")
                                              ).ack_deadline_seconds == 60


def test_rest_errors_are_the_services_json(pubsub: PubSub) -> None:
    url = f"{pubsub.rest_root}/{pubsub.publisher.topic_path(pubsub.project, 'missing')}"
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S)
    assert raised.value.code == 404
    assert json.load(raised.value)["error"]["status"] == "NOT_FOUND"
