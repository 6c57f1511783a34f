"""Playbook "evict a runaway pool": force-stop a pool while it runs jobs, then bring it back.

Passes when the pool empties, the eviction is counted, the pool recovers to its former size, and the
jobs that were running on it still finish, each exactly once.
"""

from __future__ import annotations

from runtime.access.control_api import ApiClient
from runtime.protocol import contract
from runtime.protocol.messages import JobStatus
from validation.drills.base import DrillContext, DrillFailed, counter, in_flight, wait_for
from validation.drills.jobs import publish_noop
from validation.drills.results import ResultTap

JOBS = 2  # one per default local slot: both run on the pool when it is evicted
JOB_SLEEP_S = 1.5  # long enough to still run when the eviction lands


def run(ctx: DrillContext) -> None:
    """Evict the first pool mid-job, restore it, account for the jobs (on the first replica)."""
    with ctx.first_replica_only():
        _run(ctx)


def _run(ctx: DrillContext) -> None:
    pubsub = ctx.pubsub()
    with ctx.api() as api:
        pools = api.pools()
        if not pools:
            raise DrillFailed("the scheduler reports no pool to evict")
        pool = pools[0]
        desired = pool.desired if pool.desired is not None else pool.workers
        evictions_before = counter(api, contract.METRICS.pool_evictions_total)
    job_ids = [ctx.job_id("evict", i) for i in range(JOBS)]
    with ResultTap(pubsub, job_ids) as tap:
        for job_id in job_ids:
            publish_noop(pubsub, job_id, sleep_s=JOB_SLEEP_S)
        with ctx.api() as api:
            wait_for(lambda: bool(in_flight(api)), ctx.timeout_s, "a drill job to start")
            running = in_flight(api)
            api.stop_pool(pool.id)
            wait_for(lambda: _workers(api, pool.id) == 0, ctx.timeout_s, f"pool {pool.id} to empty")
            ctx.note(f"pool {pool.id} evicted ({desired} -> 0 workers) with {len(running)} job(s) running on it")
            evicted = counter(api, contract.METRICS.pool_evictions_total) - evictions_before
            if evicted < 1:
                raise DrillFailed(f"{contract.METRICS.pool_evictions_total} did not count the eviction")
            api.scale_pool(pool.id, desired)
            took = wait_for(lambda: _workers(api, pool.id) == desired, ctx.timeout_s,
                            f"pool {pool.id} to recover {desired} worker(s)")
            ctx.note(f"pool {pool.id} back to {desired} worker(s) in {took:.1f}s")
        if not tap.wait_all(ctx.timeout_s):
            raise DrillFailed(f"jobs lost with the evicted pool: {sorted(tap.missing())}")
        tap.drain(1.0)
    if tap.duplicates():
        raise DrillFailed(f"jobs ran more than once: {tap.duplicates()}")
    failed = {job: found[-1].status.value for job, found in tap.results.items()
              if found[-1].status is not JobStatus.SUCCEEDED}
    if failed:
        raise DrillFailed(f"jobs did not survive the eviction: {failed}")
    ctx.note(f"all {JOBS} jobs succeeded once; eviction counted in {contract.METRICS.pool_evictions_total}")


def _workers(api: ApiClient, pool_id: str) -> int:
    return next((p.workers for p in api.pools() if p.id == pool_id), 0)
