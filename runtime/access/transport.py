"""Publishing job requests and collecting their results over Pub/Sub, as the real client does it.

Results are read through a private, temporary subscription on the result topic, created before the
first request is published (a subscription only sees messages published after it exists) and deleted
afterwards, so no other consumer of ``gpu-job-result-sub`` loses a message to the CLI.
"""

from __future__ import annotations

import contextlib
import json
import queue
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Self

from pydantic import ValidationError

from runtime.protocol.contract import RESULT_TOPIC
from runtime.protocol.messages import JobRequest, JobResult
from runtime.protocol.queues import DEFAULT_QUEUE
from runtime.pubsub.publisher import TopicPublisher

if TYPE_CHECKING:
    from google.cloud import pubsub_v1

# The private subscription outlives a crashed CLI by at most a day (Pub/Sub's minimum expiration TTL).
TEMP_SUBSCRIPTION_TTL_S: Final = 24 * 3600
TEMP_SUBSCRIPTION_PREFIX: Final = "gpu-job-result-cli-"
# Results are acked as soon as they are parsed; a minute is ample and bounds redelivery after a crash.
TEMP_SUBSCRIPTION_ACK_DEADLINE_S: Final = 60
# How often a waiting caller wakes to refresh its progress display even when no result arrived.
WAIT_TICK_S: Final = 0.25


@dataclass(frozen=True)
class PubSubClients:
    """A publisher and a subscriber bound to one project and endpoint."""

    project: str
    publisher: pubsub_v1.PublisherClient
    subscriber: pubsub_v1.SubscriberClient

    def topic(self, name: str) -> str:
        """Full resource path of topic ``name``."""
        return f"projects/{self.project}/topics/{name}"

    def subscription(self, name: str) -> str:
        """Full resource path of subscription ``name``."""
        return f"projects/{self.project}/subscriptions/{name}"

    def close(self) -> None:
        """Close both clients' channels."""
        with contextlib.suppress(Exception):
            self.publisher.transport.close()
        with contextlib.suppress(Exception):
            self.subscriber.close()


def make_clients(project: str, emulator_host: str | None, token: str | None = None,
                 publish_token: str | None = None) -> PubSubClients:
    """Clients for ``project``: on the emulator at ``emulator_host`` (sending ``token``, for a broker that takes
    credentials), else real Pub/Sub with ambient credentials. ``publish_token`` (default: ``token``) is the
    publisher's alone: a desk publishes to its queue with its own token and reads results with the user's."""
    from runtime.pubsub.clients import publisher_client, subscriber_client

    return PubSubClients(project, publisher_client(emulator_host, publish_token or token),
                         subscriber_client(emulator_host, token))


def publish_request(clients: PubSubClients, request: JobRequest | Mapping[str, object] | bytes,
                    extra_attributes: Mapping[str, str] | None = None) -> str:
    """Publish one request to the request topic; returns the Pub/Sub message id.

    A ``JobRequest`` is serialised with its attributes; a raw mapping or bytes (drills that send
    deliberately broken messages) is published as is, with whatever ``job_id``/``type`` it carries.
    """
    data, attributes = _message(request, extra_attributes)
    return TopicPublisher(clients.publisher, clients.project).publish_raw_request(data, attributes)


def publish_requests(clients: PubSubClients, requests: Iterable[JobRequest], *,
                     queue: str = DEFAULT_QUEUE) -> list[str]:
    """Publish a batch of requests at once (the client batches them) to ``queue``'s topic; returns their message
    ids in order.

    Waiting for each publish before the next costs a round trip and the client's batching delay per
    request; this waits once, for all of them.
    """
    publisher = TopicPublisher(clients.publisher, clients.project)
    return publisher.publish_raw_requests((request.to_message() for request in requests), queue=queue)


def _message(request: JobRequest | Mapping[str, object] | bytes,
             extra_attributes: Mapping[str, str] | None = None) -> tuple[bytes, dict[str, str]]:
    if isinstance(request, JobRequest):
        return request.to_message(extra_attributes)
    data = request if isinstance(request, bytes) else json.dumps(request).encode()
    raw = request if isinstance(request, Mapping) else {}
    attributes = {k: str(raw[k]) for k in ("job_id", "type") if k in raw}
    return data, {**attributes, **(extra_attributes or {})}


class ResultSubscription:
    """A private subscription on the result topic that hands every result to ``on_result``.

    Created on entry (before any request whose result is wanted is published: a subscription only sees
    messages published after it exists), deleted on exit; if the process dies first, Pub/Sub removes it
    after ``TEMP_SUBSCRIPTION_TTL_S`` of inactivity. ``on_result`` runs on the subscriber's threads.
    """

    def __init__(self, clients: PubSubClients, on_result: Callable[[JobResult], None],
                 prefix: str = TEMP_SUBSCRIPTION_PREFIX) -> None:
        self._clients = clients
        self._on_result = on_result
        self.name = clients.subscription(prefix + uuid.uuid4().hex[:12])
        self._future: pubsub_v1.subscriber.futures.StreamingPullFuture | None = None

    def __enter__(self) -> Self:
        self._clients.subscriber.create_subscription(request={
            "name": self.name,
            "topic": self._clients.topic(RESULT_TOPIC),
            "ack_deadline_seconds": TEMP_SUBSCRIPTION_ACK_DEADLINE_S,
            "expiration_policy": {"ttl": {"seconds": TEMP_SUBSCRIPTION_TTL_S}},
        })
        self._future = self._clients.subscriber.subscribe(self.name, callback=self._on_message)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._future is not None:
            self._future.cancel()
            with contextlib.suppress(Exception):
                self._future.result(timeout=5)
        with contextlib.suppress(Exception):
            self._clients.subscriber.delete_subscription(request={"subscription": self.name})

    def _on_message(self, message: pubsub_v1.subscriber.message.Message) -> None:
        try:
            result = JobResult.model_validate_json(message.data)
        except ValidationError:
            result = None  # not ours to judge; the scheduler's own subscription keeps a copy
        message.ack()  # a private subscription: acking costs no other consumer anything
        if result is not None:
            self._on_result(result)


class ResultCollector(ResultSubscription):
    """A private result subscription that queues results for a waiting caller.

    Use as a context manager around the publishes whose results you want::

        with ResultCollector(clients) as results:
            publish_request(clients, request)
            outcome = results.wait({request.job_id}, timeout_s=60)
    """

    def __init__(self, clients: PubSubClients, on_any: Callable[[JobResult], None] | None = None) -> None:
        """``on_any`` (optional) sees every result as it arrives, on the subscriber's thread."""
        super().__init__(clients, self._received)
        self._on_any = on_any
        self._queue: queue.Queue[JobResult] = queue.Queue()
        self.received: dict[str, JobResult] = {}

    def _received(self, result: JobResult) -> None:
        if self._on_any is not None:
            self._on_any(result)
        self._queue.put(result)

    def wait(self, job_ids: Iterable[str], timeout_s: float,
             on_result: Callable[[JobResult], None] | None = None,
             on_tick: Callable[[], None] | None = None,
             digests: Mapping[str, str] | None = None) -> dict[str, JobResult]:
        """Wait until every id in ``job_ids`` has a result or ``timeout_s`` passes; returns those received.

        A job that was retried may publish more than one result (``failed`` at the last attempt, a replay
        later); the latest one received wins. ``digests`` (job id -> ``JobRequest.digest()`` of the request
        published for it) keeps, for those ids, only results that answer that very body: a result of another
        request under the same id, or a forged one, is passed over.
        """
        wanted = set(job_ids)
        deadline = time.monotonic() + timeout_s
        while not wanted <= self.received.keys():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                result = self._queue.get(timeout=min(WAIT_TICK_S, remaining))
            except queue.Empty:
                if on_tick:
                    on_tick()
                continue
            if digests is not None and digests.get(result.job_id, result.request_digest) != result.request_digest:
                continue
            self.received[result.job_id] = result
            if result.job_id in wanted and on_result:
                on_result(result)
        return {job_id: self.received[job_id] for job_id in wanted if job_id in self.received}
