"""Poll with a deadline (never sleep-and-hope)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
INTERVAL_S = 0.25


def poll(predicate: Callable[[], T | None], timeout_s: float, what: str, interval_s: float = INTERVAL_S) -> T:
    """The first truthy value of ``predicate`` (asked every ``interval_s``) within ``timeout_s``; fails naming
    ``what`` otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
