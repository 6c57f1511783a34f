"""Drill "leader failure and takeover", at the scheduler's ``LeaseStore`` seam.

The local platform runs one scheduler replica that always leads (no lease), so two candidates are run
here on the scheduler's own in-memory lease store with its real ``LeaderElector``: first the leader
crashes and the standby takes over when the lease expires; then a renewing leader keeps the lock until
it is killed, and ``force_release`` (the stuck-lock recovery of seed 002) hands the lease over at once
instead of after expiry. The running local
scheduler's ``/status/leader`` is recorded too, to show it leads.
"""

from __future__ import annotations

import time

from runtime.scheduler.leader import InMemoryLeaseStore, LeaderElector
from validation.drills.base import DrillContext, DrillFailed, wait_for
from validation.leader import force_release

# Short lease timings keep the drill quick; the ratios are client-go's (15 s / 10 s / 2 s).
LEASE_S = 1.5
RENEW_DEADLINE_S = 1.0
RETRY_S = 0.2


def _candidates(store: InMemoryLeaseStore) -> tuple[LeaderElector, LeaderElector]:
    def make(identity: str) -> LeaderElector:
        return LeaderElector(store, identity, lease_duration_s=LEASE_S, renew_deadline_s=RENEW_DEADLINE_S)

    return make("replica-a"), make("replica-b")


def run(ctx: DrillContext) -> None:
    """Crash takeover, then stuck-lock forced release."""
    with ctx.api() as api:
        leader = api.leader()
    if not leader.get("is_leader"):
        raise DrillFailed(f"the local scheduler does not lead: {leader}")
    ctx.note(f"local scheduler {leader.get('identity')} leads (mode {leader.get('mode')}); takeover drilled "
             "at the LeaseStore seam with two candidates")

    store = InMemoryLeaseStore()
    a, b = _candidates(store)
    a.tick()
    b.tick()
    if not a.is_leader or b.is_leader:
        raise DrillFailed("replica-a did not win the first election")
    start = time.monotonic()  # replica-a crashes: it stops ticking
    took = wait_for(lambda: b.tick(), ctx.timeout_s, "replica-b to take over the expired lease")
    if took < LEASE_S - RETRY_S:
        raise DrillFailed(f"replica-b took over after {took:.2f}s, before the {LEASE_S}s lease expired")
    ctx.note(f"crash: replica-b took over {time.monotonic() - start:.2f}s after replica-a stopped "
             f"(lease {LEASE_S}s)")

    store = InMemoryLeaseStore()
    a, b = _candidates(store)
    a.tick()
    deadline = time.monotonic() + 2 * LEASE_S  # replica-a keeps renewing: the lock must hold
    while time.monotonic() < deadline:
        a.tick()
        if b.tick():
            raise DrillFailed("replica-b took a lease that was still being renewed")
        time.sleep(RETRY_S)
    # The operator confirms replica-a is gone (killed: it ticks no more), then releases its lock.
    killed = time.monotonic()
    force_release(store, expected_holder="replica-a")
    if not b.tick():
        raise DrillFailed("replica-b did not take the lease after the forced release")
    handover = time.monotonic() - killed
    if handover >= LEASE_S:
        raise DrillFailed(f"the handover took {handover:.2f}s, no faster than waiting for the lease to expire")
    ctx.note(f"stuck lock: held {2 * LEASE_S:.1f}s against replica-b while renewed; after the holder was killed, "
             f"`gpurt leader release --force` handed over in {handover:.3f}s (lease {LEASE_S}s)")
