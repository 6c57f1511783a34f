"""The local platform: the whole system on one machine (docs/local-platform.md)."""

from runtime.access.local_state import LocalState, load_state
from runtime.local.platform import DownResult, LocalConfig, LocalPlatform, LocalPlatformError, UpResult
from runtime.local.status import PlatformStatus

__all__ = ["DownResult", "LocalConfig", "LocalPlatform", "LocalPlatformError", "LocalState", "PlatformStatus",
           "UpResult", "load_state"]
