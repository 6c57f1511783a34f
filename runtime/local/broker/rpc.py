"""gRPC plumbing shared by the servicers: generic method handlers for the asyncio server that speak raw
protobuf and turn a refused request (PubSubError) into its status code.

Plain-function handlers (the quick broker calls) run in the server's small thread pool, so one that
blocks (a slow lock holder) never stalls the event loop; coroutine handlers (Pull, which waits) and
stream handlers (async generators) run on the loop and hold no thread while they wait.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from runtime.local.broker.errors import PubSubError

UnaryHandler = Callable[[Any, grpc.ServicerContext], Any]
StreamHandler = Callable[[AsyncIterator[Any], grpc.aio.ServicerContext], AsyncIterator[Any]]


def unary(handler: UnaryHandler, request_type: type, response_type: type, *,
          commit: Callable[[], None] | None = None) -> grpc.RpcMethodHandler:
    """A unary-unary method handler for ``handler`` (a function, or a coroutine function).

    ``commit`` runs after a plain function's handler and before the answer goes out (in the thread pool,
    where waiting is harmless): the durable broker's flush, so a client is told only what is on disk.
    """

    def handle(request: Any, context: grpc.ServicerContext) -> Any:
        try:
            response = handler(request, context)
            if commit is not None:
                commit()
            return response
        except PubSubError as error:
            context.abort(error.code, error.message)

    async def handle_async(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await handler(request, context)
        except PubSubError as error:
            await context.abort(error.code, error.message)

    return grpc.unary_unary_rpc_method_handler(
        handle_async if inspect.iscoroutinefunction(handler) else handle,
        request_deserializer=request_type.FromString, response_serializer=response_type.SerializeToString,
    )


def bidi(handler: StreamHandler, request_type: type, response_type: type) -> grpc.RpcMethodHandler:
    """A stream-stream method handler for ``handler`` (an async generator of responses)."""

    async def handle(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            async for response in handler(requests, context):
                yield response
        except PubSubError as error:
            await context.abort(error.code, error.message)

    return grpc.stream_stream_rpc_method_handler(
        handle, request_deserializer=request_type.FromString, response_serializer=response_type.SerializeToString
    )
