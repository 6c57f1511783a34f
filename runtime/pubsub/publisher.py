"""Publish job requests and results as protocol models, and wait until Pub/Sub has them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, Protocol

from components import contract
from runtime.protocol import JobRequest, JobResult
from runtime.pubsub.admin import topic_path

if TYPE_CHECKING:
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


class TopicPublisher:
    """Publishes to the contract's request and result topics of ``project``."""

    def __init__(self, client: pubsub_v1.PublisherClient, project: str) -> None:
        self._client = client
        self._project = project

    def publish_result(self, result: JobResult) -> str:
        """Publish ``result`` on ``gpu-job-result`` (attributes: job_id, status)."""
        return self._publish(contract.RESULT_TOPIC, result.model_dump_json().encode(), result.attributes())

    def publish_request(self, request: JobRequest, *, replay: bool = False) -> str:
        """Publish a validated ``request`` on ``gpu-job-request``."""
        attributes = request.attributes()
        if replay:
            attributes[REPLAY_ATTRIBUTE] = "1"
        body = request.model_dump_json(exclude_defaults=False).encode()
        return self._publish(contract.REQUEST_TOPIC, body, attributes)

    def publish_raw_request(self, data: bytes, attributes: Mapping[str, str] | None = None) -> str:
        """Publish bytes as they are on ``gpu-job-request`` (the probe, a replayed dead letter, drills)."""
        return self._publish(contract.REQUEST_TOPIC, data, dict(attributes or {}))

    def _publish(self, topic: str, data: bytes, attributes: dict[str, str]) -> str:
        future = self._client.publish(topic_path(self._project, topic), data, **attributes)
        return str(future.result(timeout=PUBLISH_TIMEOUT_S))
