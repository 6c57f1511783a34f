"""Publish job requests and results as protocol models, and wait until Pub/Sub has them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, Protocol

from runtime.protocol import contract
from runtime.protocol.messages import JobRequest, JobResult
from runtime.protocol.queues import DEFAULT_QUEUE, request_topic
from runtime.pubsub.admin import topic_path

if TYPE_CHECKING:
    import google.pubsub_v1 as pubsub_gapic
    from google.cloud import pubsub_v1

# A publish that takes longer than this is treated as failed; the caller keeps the message un-acked,
# so Pub/Sub redelivers it and the publish is tried again.
PUBLISH_TIMEOUT_S: Final = 60.0
# Set on a request republished from the dead-letter queue: a stored `failed` result does not answer it.
REPLAY_ATTRIBUTE: Final = contract.REPLAY_ATTRIBUTE


class ResultSink(Protocol):
    """Where the scheduler sends results (the result topic; a list in unit tests)."""

    def publish_result(self, result: JobResult) -> str:
        """Publish ``result``; returns the message id once the broker has it."""
        ...

    def publish_results(self, results: Sequence[JobResult]) -> list[str]:
        """Publish ``results`` together (a pack's); returns their message ids once the broker has them all."""
        ...


class TopicPublisher:
    """Publishes to the contract's request and result topics of ``project``."""

    def __init__(self, client: pubsub_v1.PublisherClient, project: str) -> None:
        self._client = client
        self._project = project

    def publish_result(self, result: JobResult) -> str:
        """Publish ``result`` on ``gpu-job-result`` (attributes: job_id, status)."""
        return self._publish(contract.RESULT_TOPIC, *_result_message(result))

    def publish_request(self, request: JobRequest, *, replay: bool = False, queue: str = DEFAULT_QUEUE) -> str:
        """Publish a validated ``request`` on ``queue``'s topic (``runtime.protocol.queues``)."""
        return self._publish(request_topic(queue),
                             *request.to_message({REPLAY_ATTRIBUTE: "1"} if replay else None))

    def publish_raw_request(self, data: bytes, attributes: Mapping[str, str] | None = None, *,
                            queue: str = DEFAULT_QUEUE) -> str:
        """Publish bytes as they are on ``queue``'s topic (the probe, a replayed dead letter, drills)."""
        return self._publish(request_topic(queue), data, dict(attributes or {}))

    def publish_raw_requests(self, messages: Iterable[tuple[bytes, Mapping[str, str]]], *,
                             queue: str = DEFAULT_QUEUE) -> list[str]:
        """Publish many ``(data, attributes)`` on ``queue``'s topic at once; returns their message ids.

        All are handed to the client before any is waited for, so it sends them in batches instead of one
        round trip each; it returns once Pub/Sub has every one (or raises for the first it refused).
        """
        topic = topic_path(self._project, request_topic(queue))
        futures = [self._client.publish(topic, data, **dict(attributes)) for data, attributes in messages]
        return [str(future.result(timeout=PUBLISH_TIMEOUT_S)) for future in futures]

    def _publish(self, topic: str, data: bytes, attributes: dict[str, str]) -> str:
        future = self._client.publish(topic_path(self._project, topic), data, **attributes)
        return str(future.result(timeout=PUBLISH_TIMEOUT_S))


class ResultPublisher:
    """The scheduler's result sink: each result goes out in one Publish RPC, answered before it returns.

    The scheduler publishes one result at a time and waits for each before acking its request; through
    the batching client every result would also wait for a batch timer and a commit thread.
    """

    def __init__(self, client: pubsub_gapic.PublisherClient, project: str) -> None:
        self._client = client
        self._topic = topic_path(project, contract.RESULT_TOPIC)

    def publish_result(self, result: JobResult) -> str:
        """Publish ``result`` on ``gpu-job-result`` (attributes: job_id, status); returns its message id."""
        return self.publish_results([result])[0]

    def publish_results(self, results: Sequence[JobResult]) -> list[str]:
        """Publish ``results`` in one Publish RPC (a pack's results); returns their message ids, in order."""
        messages = [{"data": data, "attributes": attributes} for data, attributes in map(_result_message, results)]
        response = self._client.publish(topic=self._topic, messages=messages, timeout=PUBLISH_TIMEOUT_S)
        return [str(message_id) for message_id in response.message_ids]


def _result_message(result: JobResult) -> tuple[bytes, dict[str, str]]:
    return result.model_dump_json().encode(), result.attributes()
