"""Every replica's flow control follows the pools' GPU slots.

A pool scaled through this replica's API resizes its consumer at once; this thread catches the rest:
a scale made through another replica, the leader's reconciler, workers that finished retiring.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from runtime.scheduler.periodic import Periodic

# How long another replica's scale takes to reach this one's flow control (seconds); one pool listing
# per period.
FOLLOW_PERIOD_S: Final = 15.0


class SlotFollower(Periodic):
    """Calls ``follow`` (re-read the pools' GPU slots, resize flow control) every ``period_s``."""

    def __init__(self, follow: Callable[[], None], period_s: float = FOLLOW_PERIOD_S) -> None:
        super().__init__("gpurt-slot-follow", follow, period_s)
