"""Drill "leader failure and takeover".

On a platform started with ``gpurt local up --replicas 2`` (or more) the drill works on the real
scheduler processes and their shared lease file: it SIGKILLs the leader (a crash: no release) and
shows a standby take over once the lease expires, at the Kubernetes Lease's timing; then it kills the
new leader and recovers the "stuck lock" with ``force_release`` (``gpurt leader release --force
--local``), which hands over at once instead of after expiry. Killed replicas are started again, so
the platform is whole afterwards.

A single replica always leads (no lease), so there the same two scenarios run with two in-process
candidates on the in-memory lease store and the elector the scheduler runs (``runtime.leases.elector``).
"""

from __future__ import annotations

import time

from runtime.access.control_api import ApiClient, ApiError
from runtime.leases.elector import LEASE_DURATION_S, RETRY_PERIOD_S, LeaderElector
from runtime.leases.file import FileLeaseStore
from runtime.leases.records import InMemoryLeaseStore
from validation.drills.base import DrillContext, DrillFailed, wait_for
from validation.leader import force_release

# Short lease timings keep the in-process drill quick; the ratios are client-go's (15 s / 10 s / 2 s).
LEASE_S = 1.5
RENEW_DEADLINE_S = 1.0
RETRY_S = 0.2
# A standby notices expiry at its first retry after the lease runs out, counted from when it last saw
# the record change (up to one retry period before the crash); the API poll adds a little more.
TAKEOVER_SLACK_S = 1.0


def run(ctx: DrillContext) -> None:
    """Crash takeover, then stuck-lock forced release: across processes when there are replicas."""
    if len(ctx.state.schedulers()) > 1:
        _run_replicas(ctx)
    else:
        _run_in_process(ctx)


# --- real replicas on the lease file ------------------------------------------------------------------


def _leaders(ctx: DrillContext) -> dict[str, dict[str, object]]:
    """``/status/leader`` of every live replica, by replica name."""
    state = ctx.platform.state  # not ``ctx.state``: that refuses a platform with a killed replica
    if state is None:
        raise DrillFailed("the local platform's state is gone")
    seen = {}
    for record in state.schedulers():
        with ApiClient(record.api_url or "", state.control_token, timeout_s=2.0) as api:
            try:
                seen[record.name] = api.leader()
            except ApiError:
                continue  # the one just killed
    return seen


def _wait_for_leader(ctx: DrillContext, among: set[str]) -> tuple[str, float]:
    """Wait until exactly one replica of ``among`` leads; its name and how long that took."""
    found: list[str] = []

    def one_leads() -> bool:
        leading = [name for name, body in _leaders(ctx).items() if name in among and body.get("is_leader")]
        found[:] = leading
        if len(leading) > 1:
            raise DrillFailed(f"split brain: {leading} all lead at once")
        return len(leading) == 1

    took = wait_for(one_leads, ctx.timeout_s, f"one of {sorted(among)} to lead")
    return found[0], took


def _run_replicas(ctx: DrillContext) -> None:
    state = ctx.state
    names = {r.name for r in state.schedulers()}
    if state.lease_file is None:
        raise DrillFailed("the replicas have no lease file to elect on")
    store = FileLeaseStore(state.lease_file)
    leader, _ = _wait_for_leader(ctx, names)
    ctx.note(f"{len(names)} replicas elect on {state.lease_file.name}; {leader} leads")

    # 1. Crash: the leader dies without releasing; a standby must wait for the lease to expire.
    killed_pid = ctx.platform.kill_scheduler(leader)
    crashed = time.monotonic()
    successor, _ = _wait_for_leader(ctx, names - {leader})
    took = time.monotonic() - crashed
    if took < LEASE_DURATION_S - RETRY_PERIOD_S - TAKEOVER_SLACK_S:
        raise DrillFailed(f"{successor} took over {took:.1f}s after the crash, before the {LEASE_DURATION_S:.0f}s "
                          "lease expired: two leaders could overlap")
    if took > LEASE_DURATION_S + RETRY_PERIOD_S + TAKEOVER_SLACK_S:
        raise DrillFailed(f"{successor} took over only {took:.1f}s after the crash (lease {LEASE_DURATION_S:.0f}s)")
    ctx.note(f"crash: {leader} (pid {killed_pid}) SIGKILLed; {successor} took over {took:.1f}s later "
             f"(lease {LEASE_DURATION_S:.0f}s, retry {RETRY_PERIOD_S:.0f}s)")
    ctx.platform.restart_scheduler(on_step=ctx.on_step, names=[leader])

    # 2. Stuck lock: kill the new leader and release its lease by force instead of waiting for expiry.
    identity = str(_leaders(ctx)[successor].get("identity"))
    ctx.platform.kill_scheduler(successor)
    killed = time.monotonic()
    force_release(store, expected_holder=identity)
    heir, _ = _wait_for_leader(ctx, names - {successor})
    handover = time.monotonic() - killed
    if handover >= LEASE_DURATION_S:
        raise DrillFailed(f"the handover took {handover:.1f}s, no faster than waiting for the lease to expire")
    ctx.note(f"stuck lock: {successor} killed, `gpurt leader release --force --local` handed the lease to {heir} "
             f"in {handover:.1f}s (lease {LEASE_DURATION_S:.0f}s)")
    ctx.platform.restart_scheduler(on_step=ctx.on_step, names=[successor])
    ctx.note("killed replicas restarted: " + ", ".join(sorted(names)) + " all up")


# --- one replica: two in-process candidates ------------------------------------------------------------


def _candidates(store: InMemoryLeaseStore) -> tuple[LeaderElector, LeaderElector]:
    def make(identity: str) -> LeaderElector:
        return LeaderElector(store, identity, lease_duration_s=LEASE_S, renew_deadline_s=RENEW_DEADLINE_S)

    return make("replica-a"), make("replica-b")


def _run_in_process(ctx: DrillContext) -> None:
    with ctx.api() as api:
        leader = api.leader()
    if not leader.get("is_leader"):
        raise DrillFailed(f"the local scheduler does not lead: {leader}")
    ctx.note(f"local scheduler {leader.get('identity')} leads (mode {leader.get('mode')}); one replica, so "
             "takeover is drilled at the LeaseStore seam with two candidates (`gpurt local up --replicas 2` "
             "drills real processes)")

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
