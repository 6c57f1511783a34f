"""Check recorded resource inputs against the property names the Pulumi SDKs declare.

Mocks accept any input, so a misspelt key in a raw dict (a nested block, a Kubernetes manifest) would only
fail at a real ``pulumi up``. The SDKs' typed ``*Args`` classes carry every property's wire name and type:
``check`` walks a recorded value down those types and reports each key the SDK does not know.
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pulumi
from pulumi import _types  # the SDK's own name/type tables of input types (what serialisation uses)


def args_class(resource_class: type) -> type:
    """The typed input class that sits beside a resource class in its SDK module.

    Generated SDKs name it ``<Resource>Args``, or ``<Resource>InitArgs`` where ``<Resource>Args`` already names a
    nested type (Kubernetes kinds such as ``Secret``).
    """
    module = sys.modules[resource_class.__module__]
    for suffix in ("InitArgs", "Args"):
        found = getattr(module, f"{resource_class.__name__}{suffix}", None)
        if found is not None and _types.is_input_type(found):
            return found
    raise LookupError(f"no input type for {resource_class.__module__}.{resource_class.__name__}")


@contextmanager
def resource_classes() -> Iterator[dict[str, type]]:
    """While active, map every registered resource's type token to the Python class that registered it."""
    seen: dict[str, type] = {}
    original = pulumi.CustomResource.__init__

    def spy(self: pulumi.CustomResource, t: str, *args: Any, **kwargs: Any) -> None:
        seen[t] = type(self)
        original(self, t, *args, **kwargs)

    pulumi.CustomResource.__init__ = spy  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        pulumi.CustomResource.__init__ = original  # type: ignore[method-assign]


def _input_types(tp: Any) -> list[type]:
    """The input-type classes a (possibly Input/Optional/Union-wrapped) annotation admits."""
    tp = _types.unwrap_type(tp)
    if _types.is_input_type(tp):
        return [tp]
    if _types._is_union_type(tp):  # the SDK's own test, which knows its Input/Output wrappers
        return [arg for member in typing.get_args(tp) for arg in _input_types(member) if arg is not type(None)]
    return []


def _container(tp: Any) -> tuple[type | None, Any]:
    """For a Sequence[...] or Mapping[str, ...] annotation: its origin and element annotation."""
    tp = _types.unwrap_type(tp)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (list, Sequence) and args:
        return Sequence, args[0]
    if origin in (dict, Mapping) and len(args) == 2:
        return Mapping, args[1]
    return None, None


def check(value: Any, tp: Any, path: str) -> list[str]:
    """Keys in ``value`` (wire form, camelCase) that the annotation ``tp`` does not declare, as dotted paths."""
    problems: list[str] = []
    kinds = _input_types(tp)
    if kinds and isinstance(value, Mapping):
        names = {name: kind for kind in kinds for name, kind in _types.input_type_types(kind).items()}
        for key, item in value.items():
            if key not in names:
                problems.append(f"{path}.{key}")
            else:
                problems += check(item, names[key], f"{path}.{key}")
        return problems
    origin, element = _container(tp)
    if origin is Sequence and isinstance(value, list):
        for index, item in enumerate(value):
            problems += check(item, element, f"{path}[{index}]")
    elif origin is Mapping and isinstance(value, Mapping):
        for key, item in value.items():
            problems += check(item, element, f"{path}[{key}]")
    return problems


def unknown_inputs(resource_class: type, props: Mapping[str, Any]) -> list[str]:
    """Every recorded input of a resource, at any depth, that its SDK's typed Args do not declare."""
    return check(props, args_class(resource_class), resource_class.__name__)
