"""SlotFollower: re-reads the slots every period, survives a failing read, stops cleanly."""

from __future__ import annotations

import threading

from runtime.scheduler.slot_follow import SlotFollower
from tests.runtime.scheduler.platform import wait_for

PERIOD_S = 0.01


def test_follows_every_period_and_survives_a_failing_read() -> None:
    calls: list[int] = []
    lock = threading.Lock()

    def follow() -> None:
        with lock:
            calls.append(len(calls))
            if len(calls) == 1:
                raise ConnectionError("the pools' API is briefly unreachable")

    follower = SlotFollower(follow, period_s=PERIOD_S)
    follower.start()
    follower.start()  # idempotent: still one thread
    wait_for(lambda: len(calls) >= 3, 5, "reads after a failing one")
    thread = follower._thread
    follower.stop()
    follower.stop()  # idempotent
    assert thread is not None and not thread.is_alive()  # stopped: no more reads
