"""The builtin broker with credentials: each principal may do what its Pub/Sub roles grant and nothing else.

The local platform's policy (runtime/local/broker_credentials.py) against a real broker, through the real
google-cloud-pubsub clients, gRPC and REST. The attack it stops (issue: result forgery on the local platform):
someone who reaches the broker reads a victim's request from the request subscription, computes its result
and publishes it to the result topic. A broker that answers everyone (as it did, and as Google's emulator
does) lets every one of those calls through.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from google.api_core import exceptions

from runtime.access.transport import TEMP_SUBSCRIPTION_PREFIX, PubSubClients, make_clients
from runtime.local.broker import EmulatorHandle, proto, start_emulator
from runtime.local.broker.access import AccessPolicy
from runtime.local.broker.errors import PubSubError
from runtime.local.broker_credentials import CLIENT_SUBSCRIPTION_PREFIX, BrokerTokens, write_credentials
from runtime.protocol import contract
from runtime.protocol.queues import QueueSpec, request_subscription, request_topic, topology, with_built_ins

PROJECT = "gpurt-access"
TIMEOUT_S = 10.0
# Two desks besides the built-in queues, as a stack declares them (Pulumi.staging.yaml).
QUEUES = with_built_ins([QueueSpec("rates-desk"), QueueSpec("credit-desk", max_slots=8)])


@pytest.fixture
def tokens() -> BrokerTokens:
    return BrokerTokens.for_queues(QUEUES)


@pytest.fixture
def broker(tmp_path: Path, tokens: BrokerTokens) -> Iterator[EmulatorHandle]:
    credentials = write_credentials(tmp_path / "credentials.json", PROJECT, tokens, QUEUES)
    with start_emulator(rest_port=0, credentials=credentials) as handle:
        clients = make_clients(PROJECT, handle.address, tokens.operator)
        try:
            from runtime.pubsub.admin import ensure_topology

            topics, subscriptions = topology(QUEUES)
            ensure_topology(PROJECT, clients.publisher, clients.subscriber, topics, subscriptions)
        finally:
            clients.close()
        yield handle


@pytest.fixture
def as_(broker: EmulatorHandle) -> Iterator:
    opened: list[PubSubClients] = []

    def clients(token: str | None) -> PubSubClients:
        opened.append(make_clients(PROJECT, broker.address, token))
        return opened[-1]

    yield clients
    for each in opened:
        each.close()


def _topic(name: str) -> str:
    return f"projects/{PROJECT}/topics/{name}"


def _subscription(name: str) -> str:
    return f"projects/{PROJECT}/subscriptions/{name}"


def _publish(clients: PubSubClients, topic: str) -> str:
    return clients.publisher.publish(_topic(topic), b'{"job_id": "victim", "type": "noop"}').result(timeout=TIMEOUT_S)


def _pull(clients: PubSubClients, subscription: str) -> list:
    response = clients.subscriber.pull(subscription=_subscription(subscription), max_messages=10,
                                       return_immediately=True, timeout=TIMEOUT_S)
    return list(response.received_messages)


def test_the_forgery_is_refused_to_a_user(as_, tokens: BrokerTokens) -> None:
    user = as_(tokens.user)
    _publish(user, contract.REQUEST_TOPIC)  # a user submits

    with pytest.raises(exceptions.PermissionDenied, match=r"pubsub\.subscriptions\.consume"):
        _pull(user, contract.REQUEST_SUBSCRIPTION)  # ... but reads no one's request
    with pytest.raises(exceptions.PermissionDenied, match=r"pubsub\.topics\.attachSubscription"):
        user.subscriber.create_subscription(name=_subscription(TEMP_SUBSCRIPTION_PREFIX + "tap"),
                                            topic=_topic(contract.REQUEST_TOPIC), timeout=TIMEOUT_S)
    with pytest.raises(exceptions.PermissionDenied, match=r"pubsub\.topics\.publish"):
        user.publisher.publish(_topic(contract.RESULT_TOPIC), b"{}").result(timeout=TIMEOUT_S)  # nor forges one
    with pytest.raises(exceptions.PermissionDenied, match=r"pubsub\.subscriptions\.consume"):
        _pull(user, contract.REQUEST_DLQ_SUBSCRIPTION)


def test_a_user_reads_results_on_a_subscription_of_its_own_only(as_, tokens: BrokerTokens) -> None:
    user, scheduler = as_(tokens.user), as_(tokens.scheduler)
    for prefix in (TEMP_SUBSCRIPTION_PREFIX, CLIENT_SUBSCRIPTION_PREFIX):
        mine = f"{prefix}mine"
        user.subscriber.create_subscription(name=_subscription(mine), topic=_topic(contract.RESULT_TOPIC),
                                            timeout=TIMEOUT_S)
        _publish(scheduler, contract.RESULT_TOPIC)
        received = _pull(user, mine)
        assert len(received) == 1
        user.subscriber.acknowledge(subscription=_subscription(mine), ack_ids=[received[0].ack_id])
        user.subscriber.delete_subscription(subscription=_subscription(mine), timeout=TIMEOUT_S)
    # the contract's result subscription starts with the same words, but is not the user's
    with pytest.raises(exceptions.PermissionDenied):
        _pull(user, contract.RESULT_SUBSCRIPTION)
    with pytest.raises(exceptions.PermissionDenied):
        user.subscriber.delete_subscription(subscription=_subscription(contract.REQUEST_SUBSCRIPTION),
                                            timeout=TIMEOUT_S)


def test_the_scheduler_consumes_requests_and_publishes_results_only(as_, tokens: BrokerTokens) -> None:
    user, scheduler = as_(tokens.user), as_(tokens.scheduler)
    _publish(user, contract.REQUEST_TOPIC)
    assert len(_pull(scheduler, contract.REQUEST_SUBSCRIPTION)) == 1
    _publish(scheduler, contract.RESULT_TOPIC)
    with pytest.raises(exceptions.PermissionDenied):
        _publish(scheduler, contract.REQUEST_TOPIC)
    with pytest.raises(exceptions.PermissionDenied):
        scheduler.publisher.delete_topic(topic=_topic(contract.RESULT_TOPIC), timeout=TIMEOUT_S)


def test_a_desk_publishes_to_its_own_queue_only_and_the_scheduler_consumes_every_queue(
        as_, tokens: BrokerTokens) -> None:
    # A desk's identity is the topic it may publish to: its token cannot pass a job off as another desk's, nor as
    # urgent or default work, nor read any request.
    assert set(tokens.queues) == {"rates-desk", "credit-desk", "urgent"}
    rates = as_(tokens.queues["rates-desk"])
    assert _publish(rates, request_topic("rates-desk"))
    for other in ("credit-desk", "urgent", "default"):
        with pytest.raises(exceptions.PermissionDenied, match=r"pubsub\.topics\.publish"):
            _publish(rates, request_topic(other))
    with pytest.raises(exceptions.PermissionDenied, match=r"pubsub\.subscriptions\.consume"):
        _pull(rates, request_subscription("rates-desk"))
    with pytest.raises(exceptions.PermissionDenied, match=r"pubsub\.topics\.publish"):
        _publish(as_(tokens.user), request_topic("rates-desk"))  # the default queue's users neither
    assert _publish(as_(tokens.queues["urgent"]), request_topic("urgent"))
    scheduler = as_(tokens.scheduler)
    assert [len(_pull(scheduler, queue.subscription)) for queue in QUEUES] == [0, 1, 0, 1]


def test_the_scheduler_consumes_the_deploy_probe(as_, tokens: BrokerTokens) -> None:
    """issue #45: the probe, published to the urgent topic as validation does, reaches the probe subscription
    alone, which the scheduler must be able to consume (on the request topic a copy reached the request
    subscription too, and that one was answered)."""
    operator, scheduler = as_(tokens.operator), as_(tokens.scheduler)
    operator.publisher.publish(_topic(contract.URGENT_REQUEST_TOPIC), b'{"job_id": "deploy-probe", "type": "noop"}',
                               **{contract.PROBE_ATTRIBUTE: "true"}).result(timeout=TIMEOUT_S)
    assert len(_pull(scheduler, contract.PROBE_SUBSCRIPTION)) == 1


def test_a_streaming_pull_is_checked_on_its_first_request(as_, tokens: BrokerTokens) -> None:
    user = as_(tokens.user)
    future = user.subscriber.subscribe(_subscription(contract.REQUEST_SUBSCRIPTION), callback=lambda m: m.ack())
    with pytest.raises(exceptions.PermissionDenied):
        future.result(timeout=TIMEOUT_S)


@pytest.mark.parametrize("token", [None, "not-a-token"])
def test_a_caller_without_a_known_token_is_refused_everything(as_, token: str | None) -> None:
    stranger = as_(token)
    with pytest.raises(exceptions.Unauthenticated):
        stranger.publisher.get_topic(topic=_topic(contract.REQUEST_TOPIC), timeout=TIMEOUT_S)
    with pytest.raises(exceptions.Unauthenticated):
        _pull(stranger, contract.REQUEST_SUBSCRIPTION)


def test_rest_calls_are_checked_the_same_way(broker: EmulatorHandle, tokens: BrokerTokens) -> None:
    root = f"http://{broker.host}:{broker.rest_port}/v1"
    body = {"messages": [{"data": "e30="}]}
    publish_result = f"{root}/{_topic(contract.RESULT_TOPIC)}:publish"
    assert httpx.post(publish_result, json=body, timeout=TIMEOUT_S).status_code == 401
    user = {"Authorization": f"Bearer {tokens.user}"}
    refused = httpx.post(publish_result, json=body, headers=user, timeout=TIMEOUT_S)
    assert refused.status_code == 403 and refused.json()["error"]["status"] == "PERMISSION_DENIED"
    pull = httpx.post(f"{root}/{_subscription(contract.REQUEST_SUBSCRIPTION)}:pull", json={"maxMessages": 1},
                      headers=user, timeout=TIMEOUT_S)
    assert pull.status_code == 403
    published = httpx.post(f"{root}/{_topic(contract.REQUEST_TOPIC)}:publish", json=body, headers=user,
                           timeout=TIMEOUT_S)
    assert published.status_code == 200, published.text


def test_without_credentials_the_broker_answers_everyone_as_googles_emulator_does() -> None:
    with start_emulator() as handle:
        clients = make_clients(PROJECT, handle.address)
        try:
            clients.publisher.create_topic(name=_topic("open"), timeout=TIMEOUT_S)
        finally:
            clients.close()


@pytest.mark.parametrize("content", ["", "{}", '{"principals": {"": "user"}, "bindings": []}',
                                     '{"principals": {}, "bindings": [{"role": "roles/owner", "members": [], '
                                     '"resource": "projects/p"}]}'])
def test_a_credentials_file_it_cannot_use_is_a_clear_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "credentials.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=r"credentials file|unknown role"):
        AccessPolicy.load(path)


def test_the_credentials_file_is_private_and_the_tokens_differ(tmp_path: Path, tokens: BrokerTokens) -> None:
    path = write_credentials(tmp_path / "credentials.json", PROJECT, tokens, QUEUES)
    assert path.stat().st_mode & 0o777 == 0o600
    assert len(set(json.loads(path.read_text())["principals"])) == 3 + 3  # and one per queue but default
    assert tokens.user not in repr(tokens) and tokens.queues["urgent"] not in repr(tokens)
    with pytest.raises(ValueError, match="no broker token for the queue"):
        write_credentials(tmp_path / "other.json", PROJECT, BrokerTokens(), QUEUES)


def test_the_status_codes_are_the_services() -> None:
    # Pub/Sub answers a missing or unknown credential UNAUTHENTICATED, a missing permission PERMISSION_DENIED
    # (https://cloud.google.com/pubsub/docs/reference/error-codes).
    policy = AccessPolicy({"t": "user"}, [])
    with pytest.raises(PubSubError) as unknown:
        policy.principal("Bearer other")
    assert unknown.value.code == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(PubSubError) as denied:
        policy.check("Bearer t", "Publish", proto.PublishRequest(topic=_topic(contract.RESULT_TOPIC)))
    assert denied.value.code == grpc.StatusCode.PERMISSION_DENIED


def test_the_users_subscription_prefixes_are_the_clients() -> None:
    from gpurt.client.session import SUBSCRIPTION_PREFIX

    assert SUBSCRIPTION_PREFIX == CLIENT_SUBSCRIPTION_PREFIX
