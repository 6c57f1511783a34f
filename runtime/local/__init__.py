"""The local platform: the whole system on one machine (docs/local-platform.md).

The names below are loaded on first use (PEP 562), not when the package is: every process of the platform
that is a module of this package (the broker, the Vertex AI stand-in) imports the package first, and the
platform's own code (``LocalPlatform`` and what it reaches: httpx, the control API's client, the Vertex AI
stand-in) took 0.4 CPU-seconds of each such start, for names those processes never use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from runtime.access.local_state import LocalState, load_state
    from runtime.local.platform import DownResult, LocalConfig, LocalPlatform, LocalPlatformError, UpResult
    from runtime.local.status import PlatformStatus

# Each exported name and the module it lives in.
_HOMES: Final = {
    "LocalState": "runtime.access.local_state", "load_state": "runtime.access.local_state",
    "DownResult": "runtime.local.platform", "LocalConfig": "runtime.local.platform",
    "LocalPlatform": "runtime.local.platform", "LocalPlatformError": "runtime.local.platform",
    "UpResult": "runtime.local.platform", "PlatformStatus": "runtime.local.status",
}

__all__ = ["DownResult", "LocalConfig", "LocalPlatform", "LocalPlatformError", "LocalState", "PlatformStatus",
           "UpResult", "load_state"]


def __getattr__(name: str) -> Any:
    """Load an exported name from its module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups find it without coming here
    return value
