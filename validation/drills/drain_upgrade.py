"""Playbook "safe drain + rolling upgrade": drain, wait for in-flight jobs, restart the scheduler, resume.

The restart is ``LocalPlatform.restart_scheduler`` (``gpurt local restart-scheduler``): every replica in
turn is drained, stopped and started again with its settings, the emulator untouched.

Passes when every job submitted around the upgrade gets exactly one ``succeeded`` result and Pub/Sub saw
no redelivery (the retry counter did not move): nothing was lost, nothing ran twice, nothing was nacked.
"""

from __future__ import annotations

from runtime.protocol import contract
from runtime.protocol.messages import JobStatus
from validation.drills.base import DrillContext, DrillFailed, counter, counter_all, in_flight, wait_for
from validation.drills.jobs import publish_noop
from validation.drills.results import ResultTap

JOBS = 4  # twice the local platform's default slots: some wait in the subscription while others run
JOB_SLEEP_S = 1.5  # long enough to be caught in flight by the drain


def run(ctx: DrillContext) -> None:
    """Drain, upgrade (restart), resume; then account for every job.

    With several replicas the jobs are steered to the first one (the others drained), whose in-flight
    list and retry counter the drill reads; the restart then replaces every replica, as an upgrade does.
    """
    with ctx.first_replica_only():
        _run(ctx)


def _run(ctx: DrillContext) -> None:
    pubsub = ctx.pubsub()
    job_ids = [ctx.job_id("drain", i) for i in range(JOBS)]
    with ctx.api() as api:
        retries_before = counter(api, contract.METRICS.job_retries_total)
    with ResultTap(pubsub, job_ids) as tap:
        for job_id in job_ids:
            publish_noop(pubsub, job_id, sleep_s=JOB_SLEEP_S)
        with ctx.api() as api:
            wait_for(lambda: bool(in_flight(api)), ctx.timeout_s, "a drill job to start")
            api.set_maintenance("drain")
            ctx.note(f"drain set with {len(in_flight(api))} job(s) in flight")
            waited = wait_for(lambda: not in_flight(api), ctx.timeout_s, "in-flight jobs to finish")
            ctx.note(f"in-flight jobs finished {waited:.1f}s after the drain; nothing new was started")
            retries_mid = counter(api, contract.METRICS.job_retries_total)
        tap.drain(0.5)
        done_before = len(tap.results)
        restarted = ctx.platform.restart_scheduler(on_step=ctx.on_step)
        pids = ", ".join(f"{r.name} {r.old_pid} → {r.new_pid}" for r in restarted)
        ctx.note(f"scheduler restarted (pid {pids}) with {done_before} of {JOBS} jobs done before the upgrade")
        with ctx.api() as api:
            api.set_maintenance("normal")
        if not tap.wait_all(ctx.timeout_s):
            raise DrillFailed(f"jobs lost across the upgrade: {sorted(tap.missing())}")
        tap.drain(1.0)  # a late duplicate would arrive now
    # The restart reset every replica's counters: what the old first replica counted, plus all new ones.
    retries = (retries_mid - retries_before) + counter_all(ctx, contract.METRICS.job_retries_total)
    if tap.duplicates():
        raise DrillFailed(f"jobs ran more than once: {tap.duplicates()}")
    bad = {job: found[0].status.value for job, found in tap.results.items()
           if found[0].status is not JobStatus.SUCCEEDED}
    if bad:
        raise DrillFailed(f"jobs did not succeed: {bad}")
    if retries:
        raise DrillFailed(f"{retries:g} redelivery(ies) during the window: the drain nacked or dropped leases")
    ctx.note(f"all {JOBS} jobs succeeded exactly once; 0 redeliveries")
