"""Values that only stand in for real ones: documentation address ranges and placeholder words.

A stack file that still carries one deploys something that cannot work (a control plane open to RFC 5737's
TEST-NET ranges admits nobody) or points at nothing. Pure functions over the raw config, so the stack
config (``components.config``) refuses such a value with its key before any resource is declared.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

# Address ranges reserved for documentation and examples, never routed: RFC 5737 (IPv4 TEST-NET-1/2/3),
# RFC 3849 (IPv6) and RFC 9637 (the larger IPv6 documentation block).
DOCUMENTATION_RANGES: Final = tuple(ipaddress.ip_network(net) for net in (
    "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32", "3fff::/20",
))
# Words that mark a value someone meant to fill in later; matched as whole tokens (split on - _ . / : space).
PLACEHOLDER_WORDS: Final = frozenset({
    "example", "changeme", "replace", "replaceme", "todo", "tbd", "fixme", "placeholder", "xxx", "yourproject",
})
_TOKEN_SPLIT: Final = re.compile(r"[^a-z0-9]+")
_ANGLE_BRACKETS: Final = re.compile(r"<[^<>]*>")


def _documentation_range(value: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        network = ipaddress.ip_network(value, strict=False)
    except ValueError:
        return None
    return next((doc for doc in DOCUMENTATION_RANGES
                 if doc.version == network.version and network.overlaps(doc)), None)  # type: ignore[arg-type]


def problem(value: str) -> str | None:
    """Why ``value`` is a stand-in rather than a real setting (None: it looks real)."""
    if (doc := _documentation_range(value)) is not None:
        return f"{value} lies in the documentation range {doc} (RFC 5737/3849), which no real client uses"
    if _ANGLE_BRACKETS.search(value):
        return f"{value!r} is a template to fill in, not a value"
    words = set(_TOKEN_SPLIT.split(value.lower())) & PLACEHOLDER_WORDS
    if words:
        return f"{value!r} is a placeholder ({', '.join(sorted(words))}), not a real value"
    return None


def find(raw: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every ``(location, reason)`` of a placeholder among the string values of a nested config value; a
    location is the keys and list indexes leading to the value."""
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            yield from find(value, (*path, str(key)))
    elif isinstance(raw, (list, tuple)):
        for index, item in enumerate(raw):
            yield from find(item, (*path, index))
    elif isinstance(raw, str) and (reason := problem(raw)) is not None:
        yield path, reason
