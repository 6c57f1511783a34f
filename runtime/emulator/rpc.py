"""gRPC plumbing shared by the servicers: generic method handlers that speak raw protobuf and turn a
refused request (PubSubError) into its status code."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc

from runtime.emulator.errors import PubSubError

UnaryHandler = Callable[[Any, grpc.ServicerContext], Any]
StreamHandler = Callable[[Iterator[Any], grpc.ServicerContext], Iterator[Any]]


def unary(handler: UnaryHandler, request_type: type, response_type: type) -> grpc.RpcMethodHandler:
    """A unary-unary method handler for ``handler``."""

    def handle(request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return handler(request, context)
        except PubSubError as error:
            context.abort(error.code, error.message)

    return grpc.unary_unary_rpc_method_handler(
        handle, request_deserializer=request_type.FromString, response_serializer=response_type.SerializeToString
    )


def bidi(handler: StreamHandler, request_type: type, response_type: type) -> grpc.RpcMethodHandler:
    """A stream-stream method handler for ``handler`` (a generator of responses)."""

    def handle(requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        try:
            yield from handler(requests, context)
        except PubSubError as error:
            context.abort(error.code, error.message)

    return grpc.stream_stream_rpc_method_handler(
        handle, request_deserializer=request_type.FromString, response_serializer=response_type.SerializeToString
    )
