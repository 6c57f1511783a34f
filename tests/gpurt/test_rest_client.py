"""A REST Pub/Sub client (gcloud-aio-pubsub) submits a job to the local platform and reads its result.

The platform records its broker's REST root in its state; a client that only speaks Pub/Sub's v1 JSON API
reaches the same topics and subscriptions the scheduler uses, with a bearer token as it would send Google one
(the broker refuses a call without one).
"""

from __future__ import annotations

import asyncio
import json
import uuid

import aiohttp
import pytest
from gcloud.aio.pubsub import PublisherClient, PubsubMessage, SubscriberClient

from runtime.local import LocalPlatform
from runtime.protocol import contract
from tests.gpurt import ON_THE_CLI_PLATFORM

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), ON_THE_CLI_PLATFORM]
RESULT_WAIT_S = 60


class _StaticToken:
    """What gcloud-aio asks for a bearer token: here the platform's own (gcloud-aio sends none in its emulator
    mode, ``api_is_dev``, so the client runs in its cloud mode against the broker's REST root)."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def get(self) -> str:
        return self._token


async def _submit_and_wait(platform: LocalPlatform, job_id: str) -> dict:
    state = platform.state
    assert state is not None and state.emulator_rest_url and state.broker_token
    token = _StaticToken(state.broker_token)
    project = f"projects/{state.project}"
    topic = f"{project}/topics/{contract.REQUEST_TOPIC}"
    tap = f"{project}/subscriptions/rest-tap-{job_id}"
    async with aiohttp.ClientSession() as session:
        publisher = PublisherClient(session=session, api_root=state.emulator_rest_url, api_is_dev=False, token=token)
        subscriber = SubscriberClient(session=session, api_root=state.emulator_rest_url, api_is_dev=False,
                                      token=token)
        await subscriber.create_subscription(tap, f"{project}/topics/{contract.RESULT_TOPIC}")
        try:
            body = json.dumps({"job_id": job_id, "type": "noop", "session_id": "rest"}).encode()
            await publisher.publish(topic, [PubsubMessage(body, job_id=job_id, type="noop")])
            async with asyncio.timeout(RESULT_WAIT_S):
                while True:
                    for message in await subscriber.pull(tap, max_messages=10):
                        await subscriber.acknowledge(tap, [message.ack_id])
                        result = json.loads(message.data)
                        if result["job_id"] == job_id:
                            return result
        finally:
            await subscriber.delete_subscription(tap)


def test_a_rest_client_gets_its_job_done(platform: LocalPlatform) -> None:
    job_id = f"rest-{uuid.uuid4().hex[:8]}"
    result = asyncio.run(_submit_and_wait(platform, job_id))
    assert result["status"] == "succeeded" and result["attempt"] == 1


def test_the_broker_refuses_a_rest_client_without_a_token(platform: LocalPlatform) -> None:
    state = platform.state
    assert state is not None and state.emulator_rest_url

    async def publish() -> None:
        async with aiohttp.ClientSession() as session:
            publisher = PublisherClient(session=session, api_root=state.emulator_rest_url)  # emulator mode: no token
            topic = f"projects/{state.project}/topics/{contract.REQUEST_TOPIC}"
            await publisher.publish(topic, [PubsubMessage(b"{}")])

    with pytest.raises(aiohttp.ClientResponseError) as refused:
        asyncio.run(publish())
    assert refused.value.status == 401
