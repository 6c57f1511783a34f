"""A request has one encoding on the wire, whoever publishes it: the scheduler's tools or the users' client."""

from __future__ import annotations

from concurrent.futures import Future

from runtime.access.transport import PubSubClients, publish_request, publish_requests
from runtime.protocol import contract
from runtime.protocol.messages import JobRequest
from runtime.pubsub.publisher import REPLAY_ATTRIBUTE, TopicPublisher


class _RecordingPublisher:
    """Stands in for ``pubsub_v1.PublisherClient``: keeps what is published, answers with a message id."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, dict[str, str]]] = []

    def publish(self, topic: str, data: bytes, **attributes: str) -> Future[str]:
        self.sent.append((topic, data, attributes))
        future: Future[str] = Future()
        future.set_result(str(len(self.sent)))
        return future


REQUEST = JobRequest.model_validate({"job_id": "call-1", "type": "european_option", "params": {"paths": 1000}})


def test_the_scheduler_tools_and_the_client_put_the_same_bytes_on_the_wire() -> None:
    tools, client = _RecordingPublisher(), _RecordingPublisher()
    TopicPublisher(tools, "p").publish_request(REQUEST)  # type: ignore[arg-type]
    clients = PubSubClients("p", client, subscriber=None)  # type: ignore[arg-type]
    publish_request(clients, REQUEST)
    publish_requests(clients, [REQUEST])
    topic = f"projects/p/topics/{contract.REQUEST_TOPIC}"
    assert tools.sent[0] == client.sent[0] == client.sent[1] == (topic, *REQUEST.to_message())


def test_extra_attributes_are_added_to_the_requests_own() -> None:
    tools = _RecordingPublisher()
    TopicPublisher(tools, "p").publish_request(REQUEST, replay=True)  # type: ignore[arg-type]
    assert tools.sent[0][2] == {"job_id": "call-1", "type": "european_option", REPLAY_ATTRIBUTE: "1"}


def test_a_batch_for_a_queue_goes_to_that_queues_topic_with_the_same_bytes() -> None:
    client = _RecordingPublisher()
    clients = PubSubClients("p", client, subscriber=None)  # type: ignore[arg-type]
    publish_requests(clients, [REQUEST], queue="rates-desk")
    assert client.sent == [("projects/p/topics/gpu-job-request-rates-desk", *REQUEST.to_message())]
