"""Who may do what on the emulator: bearer tokens for principals, and Pub/Sub IAM's roles bound to resources.

Without a policy the emulator answers everyone, as Google's emulator does. With one (``--credentials FILE``)
every RPC and REST call must carry ``authorization: Bearer <token>`` naming a principal of the file, and the
principal must hold the permission the call needs on the resource it names, or the call is refused:
UNAUTHENTICATED without a known token, PERMISSION_DENIED without the permission, as Pub/Sub answers.

The permissions each method needs and the predefined roles that grant them are Pub/Sub's
(https://cloud.google.com/pubsub/docs/access-control, "Required permissions" and "Predefined roles"). A
binding names one resource, a project (everything in it) or, ending in ``*``, every resource whose name
starts with what precedes it: what an IAM condition on ``resource.name.startsWith(...)`` grants
(https://cloud.google.com/iam/docs/conditions-resource-attributes#resource-name). One simplification:
Pub/Sub checks ``pubsub.subscriptions.create`` on the project, the emulator on the new subscription's name,
so a principal may be allowed to create only subscriptions under a prefix.

The file is JSON, written by whoever starts the emulator (``runtime.local.platform``) and readable by its
owner only::

    {"principals": {"<token>": "<principal>", ...},
     "bindings": [{"role": "roles/pubsub.publisher", "members": ["<principal>"], "resource": "projects/p/topics/t"}]}
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import grpc

from runtime.local.broker.errors import PubSubError

# The header a client sends its token in (gRPC metadata keys are lower case), as Google's APIs take an
# OAuth access token.
AUTHORIZATION: Final = "authorization"
BEARER: Final = "Bearer "

_VIEW: Final = frozenset({"pubsub.topics.get", "pubsub.topics.list", "pubsub.subscriptions.get",
                          "pubsub.subscriptions.list", "pubsub.snapshots.get", "pubsub.snapshots.list"})
_EDIT: Final = _VIEW | {
    *(f"pubsub.topics.{verb}" for verb in ("create", "delete", "update", "publish", "attachSubscription",
                                           "detachSubscription")),
    *(f"pubsub.subscriptions.{verb}" for verb in ("create", "delete", "update", "consume")),
    *(f"pubsub.snapshots.{verb}" for verb in ("create", "delete", "update", "seek")),
}
# Pub/Sub's predefined roles, less the IAM-policy and schema permissions the emulator has no method for.
ROLES: Final[Mapping[str, frozenset[str]]] = {
    "roles/pubsub.publisher": frozenset({"pubsub.topics.publish"}),
    "roles/pubsub.subscriber": frozenset({"pubsub.subscriptions.consume", "pubsub.topics.attachSubscription",
                                          "pubsub.snapshots.seek"}),
    "roles/pubsub.viewer": _VIEW,
    "roles/pubsub.editor": _EDIT,
    "roles/pubsub.admin": _EDIT,
}

# What a request needs: (permission, the resource's full name) pairs, read from the request message.
Needs = Callable[[Any], list[tuple[str, str]]]


def _on(permission: str, field: str) -> Needs:
    return lambda request: [(permission, getattr(request, field))]


def _create_subscription(request: Any) -> list[tuple[str, str]]:
    return [("pubsub.subscriptions.create", request.name), ("pubsub.topics.attachSubscription", request.topic)]


def _seek(request: Any) -> list[tuple[str, str]]:
    needs = [("pubsub.subscriptions.consume", request.subscription)]
    if request.WhichOneof("target") == "snapshot":
        needs.append(("pubsub.snapshots.seek", request.snapshot))
    return needs


# Per method of google.pubsub.v1.Publisher and .Subscriber (the access-control page's table).
METHODS: Final[Mapping[str, Needs]] = {
    "CreateTopic": _on("pubsub.topics.create", "name"),
    "GetTopic": _on("pubsub.topics.get", "topic"),
    "UpdateTopic": lambda request: [("pubsub.topics.update", request.topic.name)],
    "DeleteTopic": _on("pubsub.topics.delete", "topic"),
    "ListTopics": _on("pubsub.topics.list", "project"),
    "ListTopicSubscriptions": _on("pubsub.topics.get", "topic"),
    "Publish": _on("pubsub.topics.publish", "topic"),
    "DetachSubscription": _on("pubsub.topics.detachSubscription", "subscription"),
    "CreateSubscription": _create_subscription,
    "GetSubscription": _on("pubsub.subscriptions.get", "subscription"),
    "UpdateSubscription": lambda request: [("pubsub.subscriptions.update", request.subscription.name)],
    "DeleteSubscription": _on("pubsub.subscriptions.delete", "subscription"),
    "ListSubscriptions": _on("pubsub.subscriptions.list", "project"),
    "Pull": _on("pubsub.subscriptions.consume", "subscription"),
    "StreamingPull": _on("pubsub.subscriptions.consume", "subscription"),
    "Acknowledge": _on("pubsub.subscriptions.consume", "subscription"),
    "ModifyAckDeadline": _on("pubsub.subscriptions.consume", "subscription"),
    "Seek": _seek,
    "CreateSnapshot": lambda request: [("pubsub.snapshots.create", request.name),
                                       ("pubsub.subscriptions.consume", request.subscription)],
    "GetSnapshot": _on("pubsub.snapshots.get", "snapshot"),
    "UpdateSnapshot": lambda request: [("pubsub.snapshots.update", request.snapshot.name)],
    "DeleteSnapshot": _on("pubsub.snapshots.delete", "snapshot"),
    "ListSnapshots": _on("pubsub.snapshots.list", "project"),
}


@dataclass(frozen=True)
class Binding:
    """``role`` granted to ``members`` on ``resource`` (a full name, a project, or a prefix ending in ``*``)."""

    role: str
    members: frozenset[str]
    resource: str

    def covers(self, resource: str) -> bool:
        """Whether ``resource`` is this binding's resource, inside its project, or under its prefix."""
        if self.resource.endswith("*"):
            return resource.startswith(self.resource[:-1])
        return resource == self.resource or resource.startswith(self.resource + "/")


class AccessPolicy:
    """Principals by token and their bindings; ``check`` refuses a call the caller may not make."""

    def __init__(self, principals: Mapping[str, str], bindings: Iterable[Binding]) -> None:
        self._principals = dict(principals)
        self._bindings = tuple(bindings)
        unknown = {b.role for b in self._bindings} - ROLES.keys()
        if unknown:
            raise ValueError(f"unknown role(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(ROLES))}")

    @classmethod
    def load(cls, path: Path) -> AccessPolicy:
        """Read a credentials file; a file that is missing or malformed is a ValueError naming it."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            principals = {str(token): str(name) for token, name in data["principals"].items()}
            bindings = [Binding(str(b["role"]), frozenset(map(str, b["members"])), str(b["resource"]))
                        for b in data["bindings"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"cannot read the credentials file {path}: {error!r}") from None
        if not all(principals):
            raise ValueError(f"the credentials file {path} has an empty token")
        return cls(principals, bindings)

    def principal(self, authorization: str | None) -> str:
        """The principal an ``authorization`` header names; UNAUTHENTICATED when it names none."""
        if authorization and authorization.startswith(BEARER):
            offered = authorization[len(BEARER):].encode()
            # Compared in constant time, so the answer's timing tells nothing of a token.
            for token, principal in self._principals.items():
                if hmac.compare_digest(offered, token.encode()):
                    return principal
        raise PubSubError(grpc.StatusCode.UNAUTHENTICATED,
                          "Request had invalid authentication credentials: this emulator needs "
                          "'authorization: Bearer <token>' with a token it was given.")

    def check(self, authorization: str | None, method: str, request: Any) -> None:
        """Refuse (PubSubError) a ``method`` call carrying ``request`` unless its caller may make it."""
        principal = self.principal(authorization)
        for permission, resource in METHODS[method](request):
            if not any(permission in ROLES[b.role] and principal in b.members and b.covers(resource)
                       for b in self._bindings):
                raise PubSubError(grpc.StatusCode.PERMISSION_DENIED,
                                  f"User not authorized to perform this action: {principal} lacks "
                                  f"{permission} on {resource or 'the project'}.")


def authorization(metadata: Sequence[Any] | None) -> str | None:
    """The ``authorization`` value of a gRPC call's metadata (pairs, or Metadatum records), if any."""
    for key, value in metadata or ():
        if key == AUTHORIZATION:
            return value.decode() if isinstance(value, bytes) else str(value)
    return None


# Refuses (PubSubError) a parsed request given its call's metadata.
Guard = Callable[..., None]


def guard(policy: AccessPolicy | None, method: str) -> Guard | None:
    """The check for ``method``'s requests under ``policy``, called as ``guard(request, metadata=...)``;
    None without a policy."""
    if policy is None:
        return None

    def check(request: Any, metadata: Sequence[Any] | None) -> None:
        policy.check(authorization(metadata), method, request)

    return check
