"""A rendered stack's resources: the one record every reader of a stack uses, and the lookups over it.

The offline plan records each resource the program registers (``components.review.plan``), ``gpurt plan --json``
writes them out and ``gpurt policy check`` reads them back (``to_json``/``from_json``), the policy rules judge
them (inside the pulumi-policy pack too, which builds the same record from the engine's arguments), the IAM
proof reads identities and grants from them, the cost estimate prices the node pools and ``gpurt plan`` prints
their key settings. Properties are the engine's camelCase inputs, which is what both a policy pack and the
Pulumi mock monitor see.

Standard library only: the policy pack bundle (``components/policy/bundle.py``) ships this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

# Type tokens more than one reader looks for.
CLUSTER: Final = "gcp:container/cluster:Cluster"
NODE_POOL: Final = "gcp:container/nodePool:NodePool"
SUBSCRIPTION: Final = "gcp:pubsub/subscription:Subscription"
SERVICE_ACCOUNT: Final = "gcp:serviceaccount/account:Account"
DEPLOYMENT: Final = "kubernetes:apps/v1:Deployment"


@dataclass(frozen=True)
class Resource:
    """One resource of a rendered stack: its type token, Pulumi name, inputs and resource options.

    Made by the plan's mock monitor (every field), from a plan's JSON (what it carries), by the policy pack
    from the engine's arguments (type, name, inputs, ``protect``), and by tests by hand.
    """

    type: str
    name: str
    props: Mapping[str, Any] = field(repr=False)
    """Inputs with secrets unwrapped (what the rules, the proof and the cost estimate read)."""
    protect: bool = False
    """Pulumi's ``protect`` option: the engine refuses to delete or replace the resource."""
    custom: bool = True
    """A cloud resource, not a component (components carry their inputs for stack rules, nothing more)."""
    urn: str = ""
    parent: str | None = None
    dependencies: tuple[str, ...] = ()
    """URNs this resource waits for (explicit depends_on and those implied by its inputs)."""
    shown: Mapping[str, Any] | None = field(default=None, repr=False)
    """Inputs with secrets masked (what the plan prints); the inputs themselves when none are secret."""
    delete_before_replace: bool = False
    """A replacement deletes the old resource first (fixed names)."""
    ignore_changes: tuple[str, ...] = ()
    """Input properties whose changes Pulumi ignores."""
    replace_on_changes: tuple[str, ...] = ()
    """Input properties whose changes replace the resource (Pulumi's ``replaceOnChanges``), beyond the provider's."""
    provider: str = ""
    """Reference (``urn::id``) of the explicit provider; empty for a default provider."""

    def __post_init__(self) -> None:
        if self.shown is None:
            object.__setattr__(self, "shown", self.props)

    def get(self, *path: str) -> Any:
        """The input at ``path`` (keys from the top), or None where a level is missing."""
        return lookup(self.props, *path)

    def to_json(self) -> dict[str, Any]:
        """The resource as ``gpurt plan --json`` writes it (inputs masked)."""
        return {"type": self.type, "name": self.name, "urn": self.urn, "parent": self.parent, "custom": self.custom,
                "dependencies": list(self.dependencies), "inputs": self.shown, "protect": self.protect,
                "delete_before_replace": self.delete_before_replace, "ignore_changes": list(self.ignore_changes),
                "replace_on_changes": list(self.replace_on_changes), "provider": self.provider}

    @classmethod
    def from_state(cls, entry: Mapping[str, Any]) -> Resource:
        """A resource of a deployed stack's state (``pulumi stack export``: ``deployment.resources[]``), with the
        inputs it was last deployed with."""
        urn = str(entry.get("urn") or "")
        return cls(str(entry.get("type") or ""), urn.rsplit("::", 1)[-1], entry.get("inputs") or {},
                   custom=bool(entry.get("custom")), urn=urn, parent=entry.get("parent"))

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> Resource:
        """A resource of a plan ``gpurt plan --json`` wrote; KeyError or TypeError names what is missing."""
        inputs = entry["inputs"] or {}
        if not isinstance(inputs, Mapping):
            raise TypeError(f"inputs of {entry['name']} are not an object")
        return cls(entry["type"], entry["name"], inputs, protect=bool(entry.get("protect", False)),
                   custom=bool(entry["custom"]), urn=str(entry.get("urn") or ""), parent=entry.get("parent"),
                   dependencies=tuple(entry.get("dependencies") or ()),
                   delete_before_replace=bool(entry.get("delete_before_replace", False)),
                   ignore_changes=tuple(entry.get("ignore_changes") or ()),
                   replace_on_changes=tuple(entry.get("replace_on_changes") or ()),
                   provider=str(entry.get("provider") or ""))


def lookup(props: Mapping[str, Any] | None, *path: str) -> Any:
    """Nested lookup in engine inputs that treats a missing level (or a non-object on the way) as absent."""
    value: Any = props
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def last_segment(reference: Any) -> str:
    """``projects/p/topics/t`` or ``t`` -> ``t``: the name at the end of a resource path."""
    return str(reference).rsplit("/", 1)[-1]


def of_type(resources: Iterable[Resource], type_: str) -> list[Resource]:
    """The resources of one type token, in order."""
    return [r for r in resources if r.type == type_]


def kubernetes_object(resources: Iterable[Resource], type_: str, name: str, namespace: str) -> Resource | None:
    """The Kubernetes object of ``type_`` whose metadata names it ``namespace/name``, if the stack has one."""
    for resource in resources:
        if resource.type == type_ and resource.get("metadata", "name") == name \
                and resource.get("metadata", "namespace") == namespace:
            return resource
    return None
