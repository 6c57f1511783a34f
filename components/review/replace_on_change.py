"""Which input changes make the provider replace a resource rather than update it in place.

The list comes from the provider itself: ``provider_schema/force_new.json`` holds the ForceNew attributes of
terraform-provider-google's node pool (which pulumi-gcp bridges), with the Pulumi input path of each, and
``tests/components/test_replace_on_change.py`` keeps it equal to the provider's Go source and to the SDK's
input types. A replaced node pool is deleted first (fixed names, ``components/lifecycle.py``), so a change
to any of these takes the whole pool down until the new one is up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

SCHEMA_FILE: Final = Path(__file__).resolve().parent / "provider_schema" / "force_new.json"
_INDEX: Final = re.compile(r"\[\d+\]")


@dataclass(frozen=True)
class ForceNew:
    """One replace-on-change input: its Pulumi path (list indexes left out) and whether it is a block."""

    path: str
    block: bool
    """An object or list of objects: replaced only when it appears, disappears or changes length (its nested
    attributes have entries of their own); any other input is replaced on any change of its value."""


@cache
def force_new() -> dict[str, tuple[ForceNew, ...]]:
    """Replace-on-change inputs by Pulumi resource type, as recorded from the provider."""
    document = json.loads(SCHEMA_FILE.read_text())
    return {kind: tuple(ForceNew(row["path"], bool(row["block"])) for row in rows)
            for kind, rows in document["resources"].items()}


def _values(value: Any, segments: list[str], where: str = "") -> Iterator[tuple[str, Any]]:
    """Every (concrete path, value) at ``segments``, lists on the way expanded with their indexes; absent is
    None."""
    if not segments:
        yield where, value
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            yield from _values(item, segments, f"{where}[{index}]")
        return
    head, *rest = segments
    child = value.get(head) if isinstance(value, Mapping) else None
    yield from _values(child, rest, f"{where}.{head}" if where else head)


def _count(value: Any) -> int:
    if value is None:
        return 0
    return len(value) if isinstance(value, list) else 1


def replacing_paths(resource_type: str, base: Mapping[str, Any], head: Mapping[str, Any],
                    changed: tuple[str, ...]) -> tuple[str, ...]:
    """Which of ``changed`` (dotted input paths with list indexes) replace the resource, plus any block that
    appears or disappears; empty when the change is made in place."""
    replacing: list[str] = []
    for entry in force_new().get(resource_type, ()):
        if entry.block:
            old = dict(_values(base, entry.path.split(".")))
            new = dict(_values(head, entry.path.split(".")))
            replacing += [where for where in sorted(old.keys() | new.keys())
                          if _count(old.get(where)) != _count(new.get(where))]
        else:
            replacing += [path for path in changed
                          if (plain := _INDEX.sub("", path)) == entry.path
                          or plain.startswith((f"{entry.path}.", f"{entry.path}["))]
    return tuple(dict.fromkeys(replacing))
