"""A local filesystem behind the store's fsspec seam that fails like a broken disk or bucket on demand.

``mode`` is what it does now: ``None`` works; ``"read-only"`` refuses every write (EROFS) and reads on;
``"unreachable"`` fails reads as well (EHOSTUNREACH); ``"full"`` creates the file, then fails the write
(ENOSPC), leaving a zero-byte file behind exactly as a full disk does.
"""

from __future__ import annotations

import errno
import os
import threading
from typing import Any, Literal

from fsspec.implementations.local import LocalFileSystem

Mode = Literal["read-only", "unreachable", "full"] | None


class FailingFileSystem(LocalFileSystem):
    """``LocalFileSystem`` whose operations fail according to ``mode``; counts the failures it raised."""

    cachable = False  # fsspec would otherwise hand every caller the same instance, mode included

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self.mode: Mode = None
        self.failures = 0

    def _fail(self, writing: bool, path: str) -> None:
        with self._lock:
            mode = self.mode
            if mode is None or (mode != "unreachable" and not writing):
                return
            self.failures += 1
        if mode == "full":
            with open(self._strip_protocol(path), "wb"):  # created, then the disk has no room for its bytes
                pass
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        code = errno.EROFS if mode == "read-only" else errno.EHOSTUNREACH
        raise OSError(code, os.strerror(code), path)

    def mv(self, path1: str, path2: str, **kwargs: Any) -> None:
        """Rename, unless failing."""
        self._fail(True, path2)
        super().mv(path1, path2, **kwargs)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        """Make folders, unless failing (a full disk still makes them: they take no new blocks here)."""
        if self.mode != "full":
            self._fail(True, path)
        super().makedirs(path, exist_ok=exist_ok)

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        """Remove, unless unreachable or read-only (a full disk can still remove)."""
        if self.mode != "full":
            self._fail(True, str(path))
        super().rm(path, recursive=recursive, maxdepth=maxdepth)

    def exists(self, path: str, **kwargs: Any) -> bool:
        """Whether ``path`` exists, unless unreachable."""
        self._fail(False, path)
        return bool(super().exists(path, **kwargs))

    def _open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        self._fail("w" in mode or "a" in mode, path)
        return super()._open(path, mode, *args, **kwargs)
