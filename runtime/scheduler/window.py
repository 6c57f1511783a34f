"""How many messages a stream may hold per slot: a narrow window, or a wide one under a backlog of tiny jobs.

The narrow window holds three messages per slot: one running, one submitted ahead, one concluding
(``runtime.scheduler.consumer``). That keeps a slot busy between jobs that take it a while, and leaves the rest of a
backlog in the subscription, where another replica can take it. For jobs of a few milliseconds it is too
shallow: the ack -> broker -> next message round trip of the concluding place takes longer than the two jobs
ahead of it, so the slot idles, and packs (``runtime.scheduler.packing``) never find more than a message or two
waiting to run with. So a stream that receives nothing but tiny jobs for a while is replaced by a wide one,
which holds enough per slot for a running pack and the next one; the first job that is not tiny replaces it
by a narrow one again. Replacing a stream drains the old one like a resize: its held
messages run and are acked, nothing is nacked (docs/scheduler.md, "Wide window for tiny jobs").
"""

from __future__ import annotations

import threading
from typing import Final

from runtime.protocol.messages import MAX_TIMEOUT_S
from runtime.scheduler.packing import PACK_MAX_JOBS

# Messages held per slot beyond the running one in the narrow window. One, submitted ahead to the workers,
# is enough for a slot never to idle between jobs that are not tiny; more would lengthen the wait of the
# held ones, which another replica could have started (a burst smaller than the replicas' places would sit
# on one replica while another idles).
PREFETCH_PER_SLOT: Final = 1
# Messages per slot whose job has run and whose result is being stored and published: each keeps its
# place until its ack, and without a place of its own it would take the waiting one's, so the slot's
# next job would not be there when the running one ends.
CONCLUDING_PER_SLOT: Final = 1
# One running, one waiting (on a worker), one concluding.
NARROW_PLACES_PER_SLOT: Final = 1 + PREFETCH_PER_SLOT + CONCLUDING_PER_SLOT
# A running pack and the next pack waiting for it. Measured on a 2-core machine with one worker and bursts of
# 10 ms jobs: 3 places per slot kept the worker busy 43 % of the time, 2 packs' worth 87-89 %, 3 packs' worth
# no better (89-91 %).
WIDE_PLACES_PER_SLOT: Final = 2 * PACK_MAX_JOBS
# Tiny jobs in a row, with nothing else between them, before the window widens: two full packs, so a few
# tiny jobs among large ones never widen it.
WIDEN_AFTER_TINY: Final = 2 * PACK_MAX_JOBS
# After narrowing, the window stays narrow at least this long (seconds), so a mix of tiny and large jobs
# replaces the stream at most once per this interval and is otherwise served narrow.
WIDEN_COOLDOWN_S: Final = 10.0


def lease_s(places_per_slot: int) -> float:
    """``max_lease_duration`` of a stream holding ``places_per_slot`` messages per slot: the longest job a
    request may ask for, plus time to store and publish its result, for each place of its slot - a held
    message waits at most for the jobs ahead of it there (a pack of tiny jobs at most as long as one job)."""
    return places_per_slot * MAX_TIMEOUT_S + 600.0


class Window:
    """Decides, job by job as slots take them, whether the stream's window should be narrow or wide."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wide = False
        self._tiny_in_a_row = 0
        self._narrowed_at = -WIDEN_COOLDOWN_S  # when a wide window last narrowed: a new stream may widen at once

    @property
    def places_per_slot(self) -> int:
        """Messages the stream may hold per slot now."""
        with self._lock:
            return WIDE_PLACES_PER_SLOT if self._wide else NARROW_PLACES_PER_SLOT

    def reset(self) -> None:
        """Back to narrow, as a stream opened after a drain or a broker failure starts."""
        with self._lock:
            self._wide = False
            self._tiny_in_a_row = 0

    def observe(self, tiny: bool, jobs: int, now: float) -> bool:
        """Record ``jobs`` jobs a slot took (tiny or not, ``now`` on the monotonic clock); True when the window
        changed, so the stream should be replaced by one of ``places_per_slot``."""
        with self._lock:
            if not tiny:
                self._tiny_in_a_row = 0
                if self._wide:
                    self._wide = False
                    self._narrowed_at = now
                    return True
                return False
            self._tiny_in_a_row += jobs
            if self._wide or self._tiny_in_a_row < WIDEN_AFTER_TINY or now - self._narrowed_at < WIDEN_COOLDOWN_S:
                return False
            self._wide = True
            return True
