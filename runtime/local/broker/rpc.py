"""gRPC plumbing shared by the servicers: generic method handlers for the asyncio server that speak raw
protobuf and turn a refused request (PubSubError) into its status code.

Every request arrives as raw bytes and is measured before it is parsed: one over the service's 10 MB limit
is refused with INVALID_ARGUMENT (runtime.local.broker.limits), whatever its size, and costs no parse.

A ``guard`` (runtime.local.broker.access) sees each parsed request with the call's metadata before the
handler does, and refuses one its caller may not make; a stream's is its first request, which names the
subscription.

Plain-function handlers (the quick broker calls) run in the server's small thread pool, so one that
blocks (a slow lock holder) never stalls the event loop; coroutine handlers (Pull, which waits) and
stream handlers (async generators) run on the loop and hold no thread while they wait.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from runtime.local.broker import limits, memory
from runtime.local.broker.access import Guard
from runtime.local.broker.errors import PubSubError

UnaryHandler = Callable[[Any, grpc.ServicerContext], Any]
StreamHandler = Callable[[AsyncIterator[Any], grpc.aio.ServicerContext], AsyncIterator[Any]]


def unary(handler: UnaryHandler, request_type: type, response_type: type, *,
          commit: Callable[[], None] | None = None, guard: Guard | None = None) -> grpc.RpcMethodHandler:
    """A unary-unary method handler for ``handler`` (a function, or a coroutine function).

    ``commit`` runs after a plain function's handler and before the answer goes out (in the thread pool,
    where waiting is harmless): the durable broker's flush, so a client is told only what is on disk.
    """

    def handle(raw: bytes, context: grpc.ServicerContext) -> Any:
        refused = _refusal(len(raw))
        if refused is not None:
            del raw  # the refused bytes go now, not when gRPC drops the aborted call's traceback (this frame)
            memory.trim()
            context.abort(refused.code, refused.message)
        try:
            request = request_type.FromString(raw)
            if guard is not None:
                guard(request, context.invocation_metadata())
            response = handler(request, context)
            if commit is not None:
                commit()
            return response
        except PubSubError as error:
            context.abort(error.code, error.message)

    async def handle_async(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
        refused = _refusal(len(raw))
        if refused is not None:
            del raw
            memory.trim()
            await context.abort(refused.code, refused.message)
        try:
            request = request_type.FromString(raw)
            if guard is not None:
                guard(request, context.invocation_metadata())
            return await handler(request, context)
        except PubSubError as error:
            await context.abort(error.code, error.message)

    return grpc.unary_unary_rpc_method_handler(
        handle_async if inspect.iscoroutinefunction(handler) else handle,
        request_deserializer=None, response_serializer=response_type.SerializeToString,
    )


def bidi(handler: StreamHandler, request_type: type, response_type: type, *,
         guard: Guard | None = None) -> grpc.RpcMethodHandler:
    """A stream-stream method handler for ``handler`` (an async generator of responses)."""

    async def handle(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        first_guard = None if guard is None else functools.partial(guard, metadata=context.invocation_metadata())
        try:
            async for response in handler(_parsed(requests, request_type, first_guard), context):
                yield response
        except PubSubError as error:
            await context.abort(error.code, error.message)

    return grpc.stream_stream_rpc_method_handler(
        handle, request_deserializer=None, response_serializer=response_type.SerializeToString
    )


def _refusal(size: int) -> PubSubError | None:
    """The error a request of ``size`` bytes is refused with, or None: over the size limit, never parsed."""
    try:
        limits.check_request_bytes(size)
    except PubSubError as error:
        return error
    return None


async def _parsed(requests: AsyncIterator[bytes], request_type: type,
                  first_guard: Callable[[Any], None] | None) -> AsyncIterator[Any]:
    """The stream's requests parsed, each refused (PubSubError) first if it is over the size limit, the first
    one also if ``first_guard`` refuses it."""
    async for raw in requests:
        refused = _refusal(len(raw))
        if refused is not None:
            raise refused
        request = request_type.FromString(raw)
        if first_guard is not None:
            first_guard(request)
            first_guard = None
        yield request
