"""A JSON merge patch as the Kubernetes API server applies a client's dict body, for the fake clusters."""

from __future__ import annotations

import copy
from typing import Any


def merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """JSON merge patch (RFC 7386), in place: null deletes, objects merge, anything else replaces."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
