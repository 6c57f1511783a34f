"""The Pub/Sub REST surface (v1 JSON) and the official emulator's ``GET /`` readiness answer, on an HTTP
port beside the gRPC one.

gRPC's Python server cannot share its port with HTTP/1.1, so this listens on a port of its own (the
official emulator serves both on one). REST clients take the root explicitly, e.g. gcloud-aio-pubsub's
``api_root="http://127.0.0.1:<rest port>/v1"``. Bodies are the proto3 JSON mapping of the same
messages the gRPC services take, converted with protobuf's json_format; errors are the service's
``{"error": {"code", "message", "status"}}``. Handlers run on the emulator's event loop: a pull waits
there without holding a thread, like a gRPC Pull.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any, Final, TypeVar

import grpc
from aiohttp import web
from google.protobuf import json_format
from google.protobuf.message import Message

from runtime.local.broker import proto
from runtime.local.broker.access import AccessPolicy
from runtime.local.broker.errors import PubSubError, invalid_argument
from runtime.local.broker.state import Broker
from runtime.local.broker.subscriber import MAX_PULL_WAIT_S, SubscriberService

READY_BODY: Final = "Ok"  # what the official emulator answers on GET /
_ID: Final = "[^/:]+"  # a resource id in a path: ids never contain "/" or ":"
_HTTP_STATUS: Final = {
    grpc.StatusCode.INVALID_ARGUMENT: HTTPStatus.BAD_REQUEST,
    grpc.StatusCode.FAILED_PRECONDITION: HTTPStatus.BAD_REQUEST,
    grpc.StatusCode.OUT_OF_RANGE: HTTPStatus.BAD_REQUEST,
    grpc.StatusCode.NOT_FOUND: HTTPStatus.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS: HTTPStatus.CONFLICT,
    grpc.StatusCode.UNIMPLEMENTED: HTTPStatus.NOT_IMPLEMENTED,
    grpc.StatusCode.UNAVAILABLE: HTTPStatus.SERVICE_UNAVAILABLE,
    grpc.StatusCode.UNAUTHENTICATED: HTTPStatus.UNAUTHORIZED,
    grpc.StatusCode.PERMISSION_DENIED: HTTPStatus.FORBIDDEN,
}

M = TypeVar("M", bound=Message)
Handler = Callable[[web.Request], Awaitable[Message | None]]


class RestServer:
    """The HTTP side of one emulator; start and stop it on the emulator's event loop."""

    def __init__(self, broker: Broker, subscriber: SubscriberService, policy: AccessPolicy | None = None) -> None:
        self._broker = broker
        self._subscriber = subscriber
        self._access = policy  # None: every caller may do everything, as on Google's emulator
        self._runner: web.AppRunner | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0 picks a free port); returns the port."""
        self._runner = web.AppRunner(self._app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, reuse_port=False)
        await site.start()
        return int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        """Close the port and every open connection."""
        if self._runner is not None:
            await self._runner.cleanup()

    def _app(self) -> web.Application:
        topic = f"/v1/projects/{{project}}/topics/{{topic:{_ID}}}"
        subscription = f"/v1/projects/{{project}}/subscriptions/{{subscription:{_ID}}}"
        app = web.Application(client_max_size=32 * 1024 * 1024)  # the publish limit is checked by the broker
        app.router.add_get("/", self._ready)
        routes: list[tuple[str, str, Handler]] = [
            ("PUT", topic, self._create_topic),
            ("GET", topic, self._get_topic),
            ("DELETE", topic, self._delete_topic),
            ("GET", "/v1/projects/{project}/topics", self._list_topics),
            ("POST", topic + ":publish", self._publish),
            ("GET", topic + "/subscriptions", self._list_topic_subscriptions),
            ("PUT", subscription, self._create_subscription),
            ("GET", subscription, self._get_subscription),
            ("DELETE", subscription, self._delete_subscription),
            ("GET", "/v1/projects/{project}/subscriptions", self._list_subscriptions),
            ("POST", subscription + ":pull", self._pull),
            ("POST", subscription + ":acknowledge", self._acknowledge),
            ("POST", subscription + ":modifyAckDeadline", self._modify_ack_deadline),
        ]
        for method, path, handler in routes:
            app.router.add_route(method, path, _json_endpoint(handler, self._broker.flush))
        return app

    async def _ready(self, request: web.Request) -> web.Response:
        return web.Response(text=READY_BODY)

    # --- topics -------------------------------------------------------------------------------------

    async def _create_topic(self, request: web.Request) -> Message:
        topic = await _body(request, proto.Topic())
        topic.name = _topic_name(request)
        self._check(request, "CreateTopic", topic)
        return self._broker.create_topic(topic)

    async def _get_topic(self, request: web.Request) -> Message:
        name = self._checked(request, "GetTopic", proto.GetTopicRequest(topic=_topic_name(request))).topic
        return self._broker.get_topic(name)

    async def _delete_topic(self, request: web.Request) -> None:
        self._broker.delete_topic(
            self._checked(request, "DeleteTopic", proto.DeleteTopicRequest(topic=_topic_name(request))).topic)

    async def _list_topics(self, request: web.Request) -> Message:
        self._check(request, "ListTopics", proto.ListTopicsRequest(project=_project(request)))
        topics, token = self._broker.list_topics(_project(request), *_page(request))
        return proto.ListTopicsResponse(topics=topics, next_page_token=token)

    async def _publish(self, request: web.Request) -> Message:
        publish = await _body(request, proto.PublishRequest())
        publish.topic = _topic_name(request)
        self._check(request, "Publish", publish)
        return proto.PublishResponse(message_ids=self._broker.publish(publish))

    async def _list_topic_subscriptions(self, request: web.Request) -> Message:
        self._check(request, "ListTopicSubscriptions", proto.ListTopicSubscriptionsRequest(topic=_topic_name(request)))
        names, token = self._broker.list_topic_subscriptions(_topic_name(request), *_page(request))
        return proto.ListTopicSubscriptionsResponse(subscriptions=names, next_page_token=token)

    # --- subscriptions ------------------------------------------------------------------------------

    async def _create_subscription(self, request: web.Request) -> Message:
        subscription = await _body(request, proto.Subscription())
        subscription.name = _subscription_name(request)
        self._check(request, "CreateSubscription", subscription)
        return self._broker.create_subscription(subscription)

    async def _get_subscription(self, request: web.Request) -> Message:
        get = proto.GetSubscriptionRequest(subscription=_subscription_name(request))
        return self._broker.get_subscription(self._checked(request, "GetSubscription", get).subscription)

    async def _delete_subscription(self, request: web.Request) -> None:
        delete = proto.DeleteSubscriptionRequest(subscription=_subscription_name(request))
        self._broker.delete_subscription(self._checked(request, "DeleteSubscription", delete).subscription)

    async def _list_subscriptions(self, request: web.Request) -> Message:
        self._check(request, "ListSubscriptions", proto.ListSubscriptionsRequest(project=_project(request)))
        subscriptions, token = self._broker.list_subscriptions(_project(request), *_page(request))
        return proto.ListSubscriptionsResponse(subscriptions=subscriptions, next_page_token=token)

    async def _pull(self, request: web.Request) -> Message:
        pull = await _body(request, proto.PullRequest())
        pull.subscription = _subscription_name(request)
        self._check(request, "Pull", pull)
        # HTTP carries no deadline: wait as long as a gRPC Pull without one.
        return await self._subscriber.pull_within(pull, 0.0 if pull.return_immediately else MAX_PULL_WAIT_S)

    async def _acknowledge(self, request: web.Request) -> None:
        ack = await _body(request, proto.AcknowledgeRequest())
        ack.subscription = _subscription_name(request)
        self._check(request, "Acknowledge", ack)
        if not ack.ack_ids:
            raise invalid_argument("No ack ids were given.")
        self._broker.acknowledge(ack.subscription, ack.ack_ids)

    async def _modify_ack_deadline(self, request: web.Request) -> None:
        modify = await _body(request, proto.ModifyAckDeadlineRequest())
        modify.subscription = _subscription_name(request)
        self._check(request, "ModifyAckDeadline", modify)
        if not modify.ack_ids:
            raise invalid_argument("No ack ids were given.")
        self._broker.modify_ack_deadline(modify.subscription, modify.ack_ids, modify.ack_deadline_seconds)


    def _check(self, request: web.Request, method: str, message: Message) -> None:
        """Refuse (PubSubError) a call whose ``Authorization`` header does not allow ``method`` on ``message``."""
        if self._access is not None:
            self._access.check(request.headers.get("Authorization"), method, message)

    def _checked(self, request: web.Request, method: str, message: M) -> M:
        """``message``, once ``_check`` let it through."""
        self._check(request, method, message)
        return message


def _json_endpoint(handler: Handler, commit: Callable[[], None]) -> Callable[[web.Request], Awaitable[web.Response]]:
    """Run ``handler``; answer its message as JSON ({} for None) or a refusal as the service's error body.
    The answer waits for ``commit`` (the durable broker's flush), in a thread so the loop keeps serving."""

    async def endpoint(request: web.Request) -> web.Response:
        try:
            message = await handler(request)
            await asyncio.to_thread(commit)
        except PubSubError as error:
            status = _HTTP_STATUS.get(error.code, HTTPStatus.INTERNAL_SERVER_ERROR)
            body = {"error": {"code": int(status), "message": error.message, "status": error.code.name}}
            return web.json_response(body, status=status)
        return web.json_response({} if message is None else json_format.MessageToDict(message))

    return endpoint


async def _body(request: web.Request, message: Message) -> Any:
    """The request's JSON body parsed into ``message`` (an empty body leaves it empty)."""
    text = await request.text()
    if not text.strip():
        return message
    try:
        json_format.ParseDict(json.loads(text), message)
    except (ValueError, json_format.ParseError) as error:
        raise invalid_argument(f"Invalid JSON payload received. {error}") from None
    return message


def _project(request: web.Request) -> str:
    return f"projects/{request.match_info['project']}"


def _topic_name(request: web.Request) -> str:
    return f"{_project(request)}/topics/{request.match_info['topic']}"


def _subscription_name(request: web.Request) -> str:
    return f"{_project(request)}/subscriptions/{request.match_info['subscription']}"


def _page(request: web.Request) -> tuple[int, str]:
    try:
        size = int(request.query.get("pageSize", "0"))
    except ValueError:
        raise invalid_argument("pageSize must be a number.") from None
    return size, request.query.get("pageToken", "")
