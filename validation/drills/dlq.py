"""Playbook "DLQ storm" / drill "the DLQ policy holds": a poison job reaches the DLQ after 5 deliveries.

The job (a ``noop`` that always fails transiently) must publish one ``failed`` result, at the last of
``MAX_DELIVERY_ATTEMPTS`` deliveries, and land on the dead-letter subscription. Replayed with the DLQ
tools behind ``gpurt dlq replay``, it must run again (not be answered from the result store) and, still
poisonous, return to the DLQ after another 5 deliveries. The drill then removes its own dead letter.

It starts only on an empty DLQ, so the replay touches nothing but the drill's own message.
"""

from __future__ import annotations

from runtime.protocol import contract
from runtime.protocol.messages import JobStatus
from validation.dlq import DeadLetterQueue
from validation.drills.base import DrillContext, DrillFailed, wait_for
from validation.drills.jobs import publish_noop
from validation.drills.results import ResultTap


def run(ctx: DrillContext) -> None:
    """Poison job -> 5 deliveries -> DLQ -> replay -> 5 more -> DLQ -> cleaned up."""
    pubsub = ctx.pubsub()
    job_id = ctx.job_id("dlq", 0)
    clients = ctx.platform.pubsub()
    try:
        dlq = DeadLetterQueue(clients)
        waiting = dlq.list(limit=5)
        if waiting:
            raise DrillFailed(f"the DLQ already holds {len(waiting)}+ message(s) (e.g. job "
                              f"{waiting[0].job_id}): replay or inspect them first (`gpurt dlq list`)")
        with ResultTap(pubsub, [job_id]) as tap:
            publish_noop(pubsub, job_id, fail="transient")
            took = wait_for(lambda: dlq.inspect(job_id) is not None, ctx.timeout_s,
                            f"{job_id} to reach the dead-letter queue")
            _expect_failed_results(tap, job_id, 1, ctx.timeout_s)
            ctx.note(f"{job_id} dead-lettered {took:.1f}s after publishing; one failed result, at attempt "
                     f"{contract.MAX_DELIVERY_ATTEMPTS} of {contract.MAX_DELIVERY_ATTEMPTS}")
            report = dlq.replay()
            if list(report.replayed) == [] or report.failed:
                raise DrillFailed(f"replay did not republish the dead letter: {report}")
            _expect_failed_results(tap, job_id, 2, ctx.timeout_s)
            wait_for(lambda: dlq.inspect(job_id) is not None, ctx.timeout_s, f"{job_id} to return to the DLQ")
            ctx.note(f"replayed: {job_id} ran {contract.MAX_DELIVERY_ATTEMPTS} more times and returned to the DLQ")
        _remove_dead_letter(ctx, job_id)
    finally:
        clients.close()


def _expect_failed_results(tap: ResultTap, job_id: str, count: int, timeout_s: float) -> None:
    def arrived() -> bool:
        tap.drain(0.5)
        return len(tap.results.get(job_id, [])) >= count

    wait_for(arrived, timeout_s, f"failed result #{count} of {job_id}")
    results = tap.results[job_id]
    wrong = [r for r in results if r.status is not JobStatus.FAILED or r.attempt != contract.MAX_DELIVERY_ATTEMPTS]
    if len(results) != count or wrong:
        raise DrillFailed(f"expected {count} failed result(s) at attempt {contract.MAX_DELIVERY_ATTEMPTS}, got "
                          + ", ".join(f"{r.status.value}@{r.attempt}" for r in results))


def _remove_dead_letter(ctx: DrillContext, job_id: str) -> None:
    """Acknowledge the drill's own dead letter so the DLQ is as empty as the drill found it."""
    pubsub = ctx.pubsub()
    messages = pubsub.pull(contract.REQUEST_DLQ_SUBSCRIPTION, 10, timeout_s=2.0)
    ours = [m.ack_id for m in messages if m.attributes.get("job_id") == job_id]
    pubsub.acknowledge(contract.REQUEST_DLQ_SUBSCRIPTION, ours)
    pubsub.release(contract.REQUEST_DLQ_SUBSCRIPTION, [m.ack_id for m in messages if m.ack_id not in ours])
    ctx.note(f"removed the drill's dead letter ({len(ours)} message)")
