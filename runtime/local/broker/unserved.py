"""Services of the Pub/Sub API this emulator does not serve: the Schema service and the IAM policy RPCs
(on topics, subscriptions, snapshots and schemas). Each call is answered UNIMPLEMENTED with a message
naming the feature, as the emulator's other refusals are, instead of gRPC's bare "Method not found!"."""

from __future__ import annotations

from typing import Final

import grpc

from runtime.local.broker.errors import unimplemented

SCHEMA_SERVICE: Final = "google.pubsub.v1.SchemaService"
IAM_SERVICE: Final = "google.iam.v1.IAMPolicy"
# IAM calls reach the emulator under the service of the resource's client as well as under IAMPolicy.
_IAM_METHODS: Final = frozenset({"SetIamPolicy", "GetIamPolicy", "TestIamPermissions"})


class UnservedServices(grpc.GenericRpcHandler):
    """Answers every method of the Schema service and every IAM policy method with UNIMPLEMENTED."""

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        """A refusing handler for the methods above; None (gRPC's own UNIMPLEMENTED) for anything else."""
        service, _, method = handler_call_details.method.lstrip("/").partition("/")
        if method in _IAM_METHODS:
            feature = "IAM policies (the IAM policy RPCs; access control is the real service's)"
        elif service == SCHEMA_SERVICE:
            feature = f"schemas (the Schema service's {method})"
        else:
            return None
        error = unimplemented(feature)

        async def refuse(request: bytes, context: grpc.aio.ServicerContext) -> None:
            await context.abort(error.code, error.message)

        # Every one of these methods is unary-unary; the request is never parsed.
        return grpc.unary_unary_rpc_method_handler(refuse, request_deserializer=bytes,
                                                   response_serializer=bytes)
