"""Leader election on a lease, the way client-go elects on a Kubernetes Lease (``coordination.k8s.io/v1``).

Every gpu-scheduler replica consumes jobs; only the leader runs the singletons (pool reconciler, DLQ reclaimer).
The lease record lives behind ``LeaseStore`` (the Kubernetes API in the cloud: ``runtime.leases.kubernetes``; a
file on one machine: ``runtime.leases.file``; a dict in tests) and updates are optimistic: a write carries the
version it read, so two candidates can never both win. Expiry is judged on the candidate's own clock from when it
last *saw the record change*, never by comparing another node's timestamps, so clock skew between nodes cannot
cause a split brain.

The elector is lease plumbing, not the scheduler's own code: the gpu-scheduler ticks it, and the leader drill runs
two of it in-process, so it sits here, below both (docs/architecture.md, "Layers").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Final

from runtime.leases.records import LeaseConflict, LeaseRecord, LeaseStore

# client-go's defaults: a lease lasts 15 s, the holder must renew within 10 s or step down, and
# candidates retry every 2 s (docs/runbooks/leader-election.md: an election every 2 seconds).
LEASE_DURATION_S: Final = 15.0
RENEW_DEADLINE_S: Final = 10.0
RETRY_PERIOD_S: Final = 2.0

log = logging.getLogger(__name__)


class LeaderElector:
    """Acquires, renews and releases the lease for ``identity``; ``tick()`` once per retry period."""

    def __init__(
        self,
        store: LeaseStore,
        identity: str,
        *,
        lease_duration_s: float = LEASE_DURATION_S,
        renew_deadline_s: float = RENEW_DEADLINE_S,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        on_change: Callable[[bool], None] = lambda leading: None,
        on_error: Callable[[Exception], None] = lambda exc: None,
    ) -> None:
        if renew_deadline_s >= lease_duration_s:
            raise ValueError("the renew deadline must be shorter than the lease duration")
        self.identity = identity
        self._store = store
        self._duration = lease_duration_s
        self._renew_deadline = renew_deadline_s
        self._clock = clock
        self._wall = wall_clock
        self._on_change = on_change
        self._on_error = on_error
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._last_renewed = 0.0
        self._leading = False

    @property
    def is_leader(self) -> bool:
        """Whether this candidate holds the lease (as of the last tick)."""
        return self._leading

    @property
    def holder(self) -> str | None:
        """The holder this candidate last saw."""
        return self._observed.holder if self._observed else None

    def tick(self) -> bool:
        """One election round: acquire or renew. Returns whether this candidate now leads."""
        try:
            leading = self._try_acquire_or_renew()
        except LeaseConflict:
            leading = False  # another candidate wrote the lease first: it leads
        except Exception as exc:  # the API server being unreachable must not kill the loop
            log.warning("leader election call failed: %s", exc)
            self._on_error(exc)
            # A leader keeps retrying until its renew deadline; nobody can take over before the lease
            # expires, which is later, so the two never overlap.
            leading = self._leading and self._clock() - self._last_renewed < self._renew_deadline
        self._set_leading(leading)
        return leading

    def release(self) -> None:
        """Give the lease up (on shutdown) so a standby takes over at once instead of after expiry."""
        if not self._leading or self._observed is None:
            return
        try:
            self._store.update(replace(self._observed, holder=None, duration_s=1.0, renewed_at=self._wall()))
        except Exception as exc:
            log.warning("could not release the leader lease: %s", exc)
        self._set_leading(False)

    def _try_acquire_or_renew(self) -> bool:
        now, wall = self._clock(), self._wall()
        current = self._store.get()
        if current is None:
            record = LeaseRecord(holder=self.identity, duration_s=self._duration, acquired_at=wall, renewed_at=wall)
            self._remember(self._store.create(record), now)
            self._last_renewed = now
            return True
        if current != self._observed:
            self._remember(current, now)
        held_by_other = current.holder not in (None, self.identity)
        if held_by_other and now < self._observed_at + current.duration_s:
            return False
        if current.holder == self.identity:
            record = replace(current, renewed_at=wall, duration_s=self._duration)
        else:
            record = replace(current, holder=self.identity, duration_s=self._duration, acquired_at=wall,
                             renewed_at=wall, transitions=current.transitions + 1)
        self._remember(self._store.update(record), now)
        self._last_renewed = now
        return True

    def _remember(self, record: LeaseRecord, now: float) -> None:
        self._observed = record
        self._observed_at = now

    def _set_leading(self, leading: bool) -> None:
        if leading != self._leading:
            self._leading = leading
            log.info("leadership %s", "acquired" if leading else "lost", extra={"identity": self.identity})
            self._on_change(leading)
