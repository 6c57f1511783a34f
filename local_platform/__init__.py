"""The local platform: the whole system on one machine (docs/local-platform.md)."""

from client.local_state import LocalState, load_state
from local_platform.platform import DownResult, LocalConfig, LocalPlatform, LocalPlatformError, UpResult
from local_platform.status import PlatformStatus

__all__ = ["DownResult", "LocalConfig", "LocalPlatform", "LocalPlatformError", "LocalState", "PlatformStatus",
           "UpResult", "load_state"]
