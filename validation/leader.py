"""Leader stuck-lock recovery over the scheduler's ``LeaseStore`` seam (docs/runbooks/leader-stuck-lock.md).

The gpu-scheduler elects its leader on a Kubernetes Lease (``runtime.leases.elector``). A holder that
died without releasing keeps the lease until it expires (15 s); one that hangs while still renewing keeps
it forever. ``force_release`` empties the holder with a compare-and-swap write, so the next candidate
takes over at its next retry instead of waiting.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from runtime.leases.records import LeaseRecord, LeaseStore


class LeaderError(RuntimeError):
    """The lease cannot be read or released; the message says why."""


@dataclass(frozen=True)
class LeaseView:
    """The lease as an operator needs to see it."""

    holder: str | None
    renewed_at: datetime | None
    expires_at: datetime | None
    transitions: int

    def expired(self, now: datetime) -> bool:
        """Whether the holder failed to renew in time (judged on the caller's clock)."""
        return self.holder is None or self.expires_at is None or now >= self.expires_at


def view(record: LeaseRecord | None) -> LeaseView | None:
    """A ``LeaseView`` of a lease record, ``None`` when the lease does not exist."""
    if record is None:
        return None
    expires = record.renewed_at + timedelta(seconds=record.duration_s) if record.renewed_at else None
    return LeaseView(holder=record.holder, renewed_at=record.renewed_at, expires_at=expires,
                     transitions=record.transitions)


def force_release(store: LeaseStore, expected_holder: str | None = None,
                  now: datetime | None = None) -> LeaseRecord:
    """Empty the lease's holder. ``expected_holder`` guards against releasing a lease that just moved."""
    current = store.get()
    if current is None:
        raise LeaderError("the leader lease does not exist: no replica has ever led (nothing to release)")
    if expected_holder is not None and current.holder != expected_holder:
        raise LeaderError(f"the lease is now held by {current.holder!r}, not {expected_holder!r}: re-check first")
    if current.holder is None:
        raise LeaderError("the lease has no holder already: a candidate takes it at its next retry")
    stamp = now or datetime.now(UTC)
    # Duration 1 s and a fresh renew time: candidates that already saw the old record treat it as expired.
    return store.update(replace(current, holder=None, duration_s=1.0, renewed_at=stamp))
