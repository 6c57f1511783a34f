"""The conditions the alert drill provokes on the local platform, each with the way to remove it again.

Every condition says which alerts it should fire, whether this platform can produce it (and why not),
and, when provoked, returns the function that removes it. Conditions are real: the queue really backs
up, jobs really fail, the lease really breaks; nothing writes a metric directly.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from runtime.access.control_api import ApiClient
from runtime.protocol import contract
from validation.drills.base import DrillContext, DrillFailed, wait_for
from validation.drills.jobs import publish_noop

# JobQueueBacklog fires above 100 waiting requests, JobQueueGrowing on 50 more than earlier: 160 clears both.
BACKLOG_JOBS: Final = 160
# Failing jobs are published as a steady stream, so the failure and retry rates hold for the rules' for:.
FAILING_EVERY_S: Final = 0.5
Restore = Callable[[], None]


@dataclass(frozen=True)
class Condition:
    """One condition of the drill."""

    name: str
    alerts: tuple[str, ...]
    provoke: Callable[[DrillContext], Restore]
    unavailable: Callable[[DrillContext], str | None] = lambda ctx: None  # why it cannot be produced here


def _each_replica(ctx: DrillContext, action: Callable[[ApiClient], object]) -> None:
    state = ctx.state
    for record in state.schedulers():
        with ApiClient(record.api_url or "", state.control_token) as api:
            action(api)


# --- queue stalled: drained intake, evicted pools, a backlog ------------------------------------------


def stall_queue(ctx: DrillContext) -> Restore:
    """Drain every replica, evict every pool, publish ``BACKLOG_JOBS`` no-op jobs nobody takes."""
    sizes: dict[str, dict[str, int]] = {}

    def stop(api: ApiClient) -> None:
        api.set_maintenance("drain")
        sizes[api.base_url] = {p.id: p.desired if p.desired is not None else p.workers for p in api.pools()}
        api.stop_all_pools()

    _each_replica(ctx, stop)
    ctx.note(f"drained {len(sizes)} replica(s) and evicted their pools")
    pubsub = ctx.pubsub()
    for index in range(BACKLOG_JOBS):
        publish_noop(pubsub, ctx.job_id("alerts-backlog", index))
    ctx.note(f"published {BACKLOG_JOBS} no-op jobs onto the stalled queue")

    def restore() -> None:
        def resume(api: ApiClient) -> None:
            for pool, workers in sizes.get(api.base_url, {}).items():
                api.scale_pool(pool, workers)
            api.set_maintenance("normal")

        _each_replica(ctx, resume)
        ctx.note("pools restored and intake resumed: the backlog drains")

    return restore


# --- failing jobs: permanent failures and dead letters ----------------------------------------------


def fail_jobs(ctx: DrillContext) -> Restore:
    """A steady stream of no-op jobs that fail permanently and transiently (the latter dead-letter)."""
    pubsub = ctx.pubsub()
    stop = threading.Event()
    transient: list[str] = []

    def stream() -> None:
        index = 0
        while not stop.is_set():
            publish_noop(pubsub, ctx.job_id("alerts-fail", index), fail="permanent")
            transient.append(ctx.job_id("alerts-dead", index))
            publish_noop(pubsub, transient[-1], fail="transient")
            index += 1
            stop.wait(FAILING_EVERY_S)

    thread = threading.Thread(target=stream, name="alert-drill-failing-jobs", daemon=True)
    thread.start()
    ctx.note(f"publishing a permanently and a transiently failing no-op job every {FAILING_EVERY_S:g} s")

    def restore() -> None:
        stop.set()
        thread.join()
        ctx.note(f"stopped publishing; waiting for the {len(transient)} transient job(s) to be dead-lettered")
        _remove_dead_letters(ctx, set(transient))

    return restore


def _remove_dead_letters(ctx: DrillContext, job_ids: set[str]) -> None:
    """Acknowledge the drill's own dead letters (others are released untouched) once all have arrived."""
    pubsub = ctx.pubsub()
    left = set(job_ids)

    def collect() -> bool:
        messages = pubsub.pull(contract.REQUEST_DLQ_SUBSCRIPTION, 100, timeout_s=1.0)
        ours = [m for m in messages if m.attributes.get("job_id") in left]
        pubsub.acknowledge(contract.REQUEST_DLQ_SUBSCRIPTION, [m.ack_id for m in ours])
        pubsub.release(contract.REQUEST_DLQ_SUBSCRIPTION, [m.ack_id for m in messages if m not in ours])
        left.difference_update(m.attributes.get("job_id") for m in ours)
        return not left

    took = wait_for(collect, ctx.timeout_s, f"the drill's {len(job_ids)} dead letter(s)")
    ctx.note(f"removed the drill's {len(job_ids)} dead letter(s) from the DLQ ({took:.1f}s)")


# --- leader: a corrupt lease ---------------------------------------------------------------------------


def no_lease_file(ctx: DrillContext) -> str | None:
    """Why the leader condition cannot be produced: one replica leads without any lease."""
    if ctx.state.lease_file is None:
        return ("one scheduler replica leads without an election, so no leader failure exists here; "
                "start the platform with `gpurt local up --replicas 2` to drill it")
    return None


def corrupt_lease(ctx: DrillContext) -> Restore:
    """Overwrite the replicas' lease file with garbage: every election call fails and the leader steps down."""
    lease = ctx.state.lease_file
    if lease is None:
        raise DrillFailed("the platform has no lease file")
    scratch = lease.with_name(f"{lease.name}.drill.tmp")
    scratch.write_text("not a lease: written by the alert drill\n")
    os.replace(scratch, lease)  # atomically: a replica never reads half of it
    ctx.note(f"replaced the leader lease {lease} with an unreadable file")

    def restore() -> None:
        lease.unlink(missing_ok=True)  # the next election round creates a fresh lease
        ctx.note("removed the unreadable lease: the replicas elect a leader again")

    return restore


# --- reclaimer: its subscription is gone ---------------------------------------------------------------


def delete_dlq_subscription(ctx: DrillContext) -> Restore:
    """Delete the dead-letter subscription (only while it is empty) so the DLQ reclaimer's pulls fail."""
    from runtime.pubsub.admin import ensure_topology

    pubsub = ctx.pubsub()
    waiting = pubsub.pull(contract.REQUEST_DLQ_SUBSCRIPTION, 1, timeout_s=1.0)
    if waiting:
        pubsub.release(contract.REQUEST_DLQ_SUBSCRIPTION, [m.ack_id for m in waiting])
        raise DrillFailed("the DLQ holds messages, which deleting its subscription would lose: replay or inspect "
                          "them first (`gpurt dlq list`)")
    pubsub.delete_subscription(contract.REQUEST_DLQ_SUBSCRIPTION)
    ctx.note(f"deleted {contract.REQUEST_DLQ_SUBSCRIPTION}: the reclaimer cannot read the DLQ")

    def restore() -> None:
        clients = ctx.platform.pubsub()
        try:
            ensure_topology(ctx.state.project, clients.publisher, clients.subscriber)
        finally:
            clients.close()
        ctx.note(f"recreated {contract.REQUEST_DLQ_SUBSCRIPTION}")

    return restore


STALLED_QUEUE: Final = Condition(
    "queue stalled (intake drained, pools evicted, backlog published)",
    ("JobQueueBacklog", "JobQueueGrowing", "DaskWorkersAllDown", "PoolEvictionsIncreasing"), stall_queue)
FAILING_JOBS: Final = Condition(
    "jobs failing (permanent failures, dead letters)",
    ("JobFailureRateHigh", "DeadLetterQueueGrowing", "JobRetriesElevated"), fail_jobs)
RECLAIMER: Final = Condition(
    "DLQ reclaimer failing (its subscription deleted)", ("ReclaimerErrors",), delete_dlq_subscription)
NO_LEADER: Final = Condition(
    "no leader (unreadable lease file)", ("LeaderElectionFailures", "SchedulerLeaderMissing"), corrupt_lease,
    no_lease_file)
# Conditions of one phase run at the same time, to keep the drill short: they do not mask each other. A
# stalled queue consumes nothing, so failing jobs need a phase of their own; the reclaimer runs on the
# leader, so it fails while a leader exists.
PHASES: Final = ((STALLED_QUEUE, RECLAIMER), (FAILING_JOBS, NO_LEADER))
