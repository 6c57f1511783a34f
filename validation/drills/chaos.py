"""Drill "chaos": a mixed load of jobs while faults strike in turn; nothing may be lost or answered twice differently.

The load (``--jobs``, 10,000 by default) is mostly ``noop`` jobs, with small option and random-walk
kernels, jobs that fail permanently and malformed requests, each with the status it must end in. It is
published in equal slices; before each fault the next slice goes out and the fault strikes once the
earlier slices are done and jobs are running:

1. a Dask worker process is SIGKILLed (its nanny starts another);
2. a scheduler replica is SIGKILLed with its workers, then started again;
3. intake is drained on every replica, then resumed;
4. a replica's API, then its probes' own port, is flooded with silent connections past its cap for seconds
   (``validation/drills/flood.py``): its probes must all be answered, and the API must answer again afterwards;
5. the result store fails for a few seconds: made read-only (or, where root ignores that, unavailable);
6. the result store fails for minutes (``--store-outage``, 5 by default, at real time): replicas must stop
   intake and keep the jobs they hold, so nothing is dead-lettered.

The drill's own subscription on the result topic (``ResultLedger``) counts, per job id: lost (no
result), duplicated (more than one result message; whether they differ), unexpected outcomes, and
dead-lettered requests; what a fault itself found wrong (a probe unanswered); and per fault the time
from the strike until the platform was whole again and every job it caught running had its result. It
passes with 0 lost, 0 differing duplicates, no unexpected outcome, nothing dead-lettered and no problem
found by a fault.

The load is spread over every request queue the platform runs (``gpurt local up --stack``: the desks, the
default and the urgent queue), round robin, so the faults strike a replica consuming several queues at once; the
accounting is per job, whichever queue it came through.

Then it restarts the local broker: with intake drained, a few requests wait in the queues' subscriptions, the
emulator is restarted, and every one of them must still get its result (the builtin broker keeps them on
disk; on the official emulator, which keeps them in memory only, the loss is reported, not judged); the
drill also checks that the platform serves a new job.

Then hostile input (``validation/drills/hostile.py``): a body built to be slow to parse and messages that
name another job only in their attribute must be answered for their own ids, quickly, with every replica
healthy throughout, and the other job must still run.

Then forgeries (``validation/drills/forgery.py``): the broker must refuse a user's token and a caller without one
every call a forger needs (reading requests, publishing a result); then a forged result and a forged dead
letter, each aimed at a victim's job, must leave the victim's client with its own result, and the store with it;
another computation run under a victim's id first must leave the victim's client with a conflict, never that
computation's result.

Last, strangers on loopback (``validation/drills/loopback.py``): every replica's Dask scheduler must refuse a
client without the cluster's credentials, and the Vertex AI stand-in (when running) a command.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from runtime.access.transport import PubSubClients
from runtime.protocol.messages import JobStatus
from runtime.protocol.queues import BUILT_IN_QUEUES, QueueSpec, request_topic
from validation.drills import faults, flood, forgery, hostile, loopback
from validation.drills.base import POLL_S, DrillContext, DrillFailed, take_dead_letters, wait_for
from validation.drills.ledger import ResultLedger, Tally

FAULTS: Final[tuple[Callable[[DrillContext], faults.Fault], ...]] = (
    faults.kill_worker, faults.kill_replica, faults.drain_intake, flood.connection_flood, faults.store_fails,
    faults.long_store_outage)
# The first jobs of every slice sleep this long (seconds), so a fault always finds jobs running.
LONG_JOB_S: Final = 1.0
LONG_PER_SLICE: Final = 4  # two replicas x two local workers
# The load's mix, as (share of every 20 jobs): 1 malformed, 1 permanent failure, 2 european options,
# 1 random walk, the rest noop jobs of 0 to 50 ms.
MIX_PERIOD: Final = 20
NOOP_SLEEPS_S: Final = (0.0, 0.01, 0.05)
# Requests left waiting in the subscription across the broker restart.
BROKER_RESTART_JOBS: Final = 10
# On a broker that keeps nothing (the official emulator), how long a stray request has to show up (seconds).
BROKER_GRACE_S: Final = 5.0
# Late duplicates arrive within this long after the last first result (seconds).
SETTLE_S: Final = 2.0
PUBLISH_TIMEOUT_S: Final = 120.0
RUNNING_WAIT_S: Final = 30.0  # how long a fault waits for a job to be running before striking anyway


@dataclass(frozen=True)
class Planned:
    """One request of the load and the status it must end in."""

    job_id: str
    data: bytes
    attributes: dict[str, str]
    expect: JobStatus
    queue: str = BUILT_IN_QUEUES[0].name


def platform_queues(ctx: DrillContext) -> tuple[QueueSpec, ...]:
    """The request queues the platform under drill runs, from its saved state (the built-in ones without one)."""
    state = ctx.platform.state
    return state.queues if state is not None and state.queues else BUILT_IN_QUEUES


def plan(ctx: DrillContext, jobs: int) -> list[Planned]:
    """The mixed load: ``jobs`` requests with their expected outcomes, spread round robin over the queues."""
    slice_size = max(1, -(-jobs // (len(FAULTS) + 1)))
    queues = [queue.name for queue in platform_queues(ctx)]
    load = []
    for index in range(jobs):
        job_id = ctx.job_id("chaos", index)
        body: dict[str, Any] = {"job_id": job_id, "type": "noop", "session_id": "gpurt-drill-chaos"}
        expect = JobStatus.SUCCEEDED
        kind = index % MIX_PERIOD
        if index % slice_size < LONG_PER_SLICE:
            body["params"] = {"sleep_s": LONG_JOB_S}
        elif kind == 0:
            body["params"], expect = {"sleep_s": -1}, JobStatus.REJECTED  # out of range: malformed
        elif kind == 1:
            body["params"], expect = {"fail": "permanent"}, JobStatus.FAILED
        elif kind in (2, 3):
            body |= {"type": "european_option", "params": {"paths": 2_000, "seed": index}}
        elif kind == 4:
            body |= {"type": "random_walk", "params": {"paths": 1_000, "steps": 4, "seed": index}}
        else:
            body["params"] = {"sleep_s": NOOP_SLEEPS_S[index % len(NOOP_SLEEPS_S)]}
        load.append(Planned(job_id, json.dumps(body).encode(), {"job_id": job_id, "type": body["type"]}, expect,
                            queues[index % len(queues)]))
    return load


def publish(clients: PubSubClients, requests: list[Planned]) -> None:
    """Publish ``requests``, each to its queue's topic, in the client's batches; wait until the broker has them all."""
    futures = [clients.publisher.publish(clients.topic(request_topic(r.queue)), r.data, **r.attributes)
               for r in requests]
    for future in futures:
        future.result(timeout=PUBLISH_TIMEOUT_S)


def run(ctx: DrillContext) -> None:
    """Mixed load under the faults in turn, accounted per job; then the broker restart's loss, reported."""
    state = ctx.state
    replicas = len(state.schedulers())
    if replicas < 2:
        ctx.note("one scheduler replica: killing it stops all intake until it is back "
                 "(`gpurt local up --replicas 2` drills a crash the others ride out)")
    load = plan(ctx, ctx.jobs)
    planned = {r.job_id: r.expect for r in load}
    size = max(1, -(-len(load) // (len(FAULTS) + 1)))
    slices = [load[i:i + size] for i in range(0, len(load), size)]
    clients = ctx.platform.pubsub()
    struck: list[faults.Fault] = []
    start = time.monotonic()
    try:
        with ResultLedger(clients, planned) as ledger:
            published = 0
            for index, inject in enumerate((None, *FAULTS)):
                batch = slices[index] if index < len(slices) else []
                publish(clients, batch)
                published += len(batch)
                if inject is None:
                    continue
                _wait_for_earlier_slices(ctx, ledger, published - len(batch), published)
                fault = inject(ctx)
                struck.append(fault)
                ctx.note(_describe(fault))
                _wait_for_caught(ctx, ledger, fault)
            _wait_for_all(ctx, ledger, len(load))
            time.sleep(SETTLE_S)  # a duplicate would arrive now: a fixed quiet period, no condition to poll
            elapsed = time.monotonic() - start
            tally = ledger.tally(planned)
            recoveries = {f.name: _recovery_s(f, ledger) for f in struck}
    finally:
        clients.close()
    dead = _dead_letters(ctx, set(planned))
    _account(ctx, tally, recoveries, dead, elapsed, replicas)
    lost_in_restart = _broker_restart(ctx)
    hostile.run(ctx)
    forgery.run(ctx)
    loopback.run(ctx)
    _judge(tally, dead, lost_in_restart, [problem for fault in struck for problem in fault.problems])


def _wait_for_earlier_slices(ctx: DrillContext, ledger: ResultLedger, earlier: int, published: int) -> None:
    """Let the earlier slices finish and the new one start, so the fault lands on running jobs."""
    # Jobs still missing after --timeout without news are left to the final count (lost), not waited for.
    ledger.wait_for(earlier, ctx.timeout_s, on_tick=lambda done: ctx.on_step(
        f"chaos: {done}/{published} results; next fault once {earlier} are done"))
    # A small load's new slice may be done already: then the fault strikes anyway, catching nothing.
    deadline = time.monotonic() + min(ctx.timeout_s, RUNNING_WAIT_S)
    while not faults.jobs_in_flight(ctx) and time.monotonic() < deadline:
        time.sleep(POLL_S)


def _wait_for_caught(ctx: DrillContext, ledger: ResultLedger, fault: faults.Fault) -> None:
    """Let the jobs a fault caught finish before the next fault, so each recovery is its own.

    A job whose result does not come within ``--timeout`` is left to the final count (lost or late).
    """
    deadline = time.monotonic() + ctx.timeout_s
    while any(ledger.first_at(job) is None for job in fault.caught) and time.monotonic() < deadline:
        ctx.on_step(f"chaos: after '{fault.name}', waiting for the {len(fault.caught)} job(s) it caught")
        time.sleep(POLL_S)


def _wait_for_all(ctx: DrillContext, ledger: ResultLedger, total: int) -> None:
    # The drill gives up once no result arrives for --timeout; what is missing then is counted as lost.
    ledger.wait_for(total, ctx.timeout_s, on_tick=lambda done: ctx.on_step(
        f"chaos: {done}/{total} results"))


def _recovery_s(fault: faults.Fault, ledger: ResultLedger) -> float | None:
    """From the strike until the platform was whole and every job it caught had a result; None if one never did."""
    if fault.skipped:
        return None
    done = [ledger.first_at(job) for job in fault.caught]
    if any(at is None for at in done):
        return None
    return max([fault.whole_at, *(at for at in done if at is not None)]) - fault.struck_at


def _describe(fault: faults.Fault) -> str:
    if fault.skipped:
        return f"{fault.name}: skipped ({fault.skipped})"
    return f"{fault.name}: {fault.detail}; {len(fault.caught)} job(s) running when it struck"


def _dead_letters(ctx: DrillContext, ours: set[str]) -> int:
    """How many of the load's requests sit on the dead-letter subscription; they are removed, others released."""
    return take_dead_letters(ctx, ours)


def _account(ctx: DrillContext, tally: Tally, recoveries: dict[str, float | None], dead: int, elapsed: float,
             replicas: int) -> None:
    identical = tally.duplicated - len(tally.differing)
    ctx.figures.update({
        "jobs": tally.jobs,
        "scheduler replicas": replicas,
        "request queues": ", ".join(queue.name for queue in platform_queues(ctx)),
        "duration_s": round(elapsed, 1),
        "throughput_jobs_per_s": round(tally.jobs / elapsed, 1) if elapsed else None,
        **{f"results {status}": count for status, count in sorted(tally.by_status.items())},
        "lost": len(tally.lost),
        "duplicated (identical)": identical,
        "duplicated (differing)": len(tally.differing),
        "unexpected outcome": len(tally.unexpected),
        "dead-lettered": dead,
        **{f"recovery_s {name}": None if s is None else round(s, 1) for name, s in recoveries.items()},
    })
    ctx.note(f"{tally.jobs} jobs in {elapsed:.0f}s on {replicas} replica(s): {len(tally.lost)} lost, "
             f"{tally.duplicated} duplicated ({len(tally.differing)} differing), {len(tally.unexpected)} "
             f"unexpected outcome(s), {dead} dead-lettered")


def _broker_restart(ctx: DrillContext) -> int:
    """Requests waiting in the subscription when the emulator restarts: how many are lost. Only the
    builtin broker (started with ``--data-dir``) is held to 0; the official one keeps nothing.

    The restart is the runbook's (``gpurt local restart-broker``: ``LocalPlatform.restart_broker``), with the
    drill's requests published while intake is drained and its ledger subscribed before intake resumes.
    """
    job_ids = [ctx.job_id("chaos-broker", i) for i in range(BROKER_RESTART_JOBS)]
    durable = ctx.platform.broker_is_durable()
    queues = [queue.name for queue in platform_queues(ctx)]
    requests = [Planned(job_id, json.dumps({"job_id": job_id, "type": "noop"}).encode(),
                        {"job_id": job_id, "type": "noop"}, JobStatus.SUCCEEDED, queues[i % len(queues)])
                for i, job_id in enumerate(job_ids)]
    probe = ctx.job_id("chaos-broker", BROKER_RESTART_JOBS)
    with contextlib.ExitStack() as stack:
        with ctx.platform.intake_drained(ctx.timeout_s, on_step=ctx.on_step):
            clients = ctx.platform.pubsub()
            try:
                publish(clients, requests)
            finally:
                clients.close()
            pid = ctx.platform.restart_emulator(on_step=ctx.on_step)
            clients = ctx.platform.pubsub()
            stack.callback(clients.close)
            # Subscribed before intake resumes: the results of the requests that survived come at once.
            ledger = stack.enter_context(ResultLedger(clients, [*job_ids, probe]))
        publish(clients, [Planned(probe, json.dumps({"job_id": probe, "type": "noop"}).encode(),
                                  {"job_id": probe, "type": "noop"}, JobStatus.SUCCEEDED)])
        took = wait_for(lambda: ledger.first_at(probe) is not None, ctx.timeout_s,
                        "a new job to finish after the broker restart")
        ctx.figures["broker restart: first new job done after (s)"] = round(took, 1)

        def survived() -> int:
            return sum(ledger.first_at(job) is not None for job in job_ids)

        if durable:
            with contextlib.suppress(DrillFailed):  # what is still missing then is counted as lost
                wait_for(lambda: survived() == BROKER_RESTART_JOBS, ctx.timeout_s,
                         "the requests that waited across the broker restart")
        else:
            time.sleep(BROKER_GRACE_S)  # nothing survives: give a stray one time to show up
        lost = BROKER_RESTART_JOBS - survived()
    ctx.figures["broker restart: waiting requests lost"] = f"{lost} of {BROKER_RESTART_JOBS}"
    kept = "the broker keeps them on disk" if durable else "this broker keeps messages in memory only"
    ctx.note(f"broker restart (emulator now pid {pid}): {lost} of {BROKER_RESTART_JOBS} requests waiting in "
             f"{len(queues)} queues' subscriptions were lost ({kept}); a new job finished {took:.1f}s after the "
             "restart")
    return lost if durable else 0


def _judge(tally: Tally, dead: int, lost_in_restart: int = 0, fault_problems: list[str] | None = None) -> None:
    problems = list(fault_problems or [])
    if lost_in_restart:
        problems.append(f"{lost_in_restart} of {BROKER_RESTART_JOBS} request(s) lost across the broker restart")
    if tally.lost:
        problems.append(f"{len(tally.lost)} job(s) lost (e.g. {', '.join(tally.lost[:3])})")
    if tally.differing:
        problems.append(f"{len(tally.differing)} job(s) answered twice with different results "
                        f"(e.g. {', '.join(tally.differing[:3])})")
    if tally.unexpected:
        sample = ", ".join(f"{job}: {status}" for job, status in list(tally.unexpected.items())[:3])
        problems.append(f"{len(tally.unexpected)} job(s) ended otherwise than planned ({sample})")
    if dead:
        problems.append(f"{dead} request(s) dead-lettered")
    if problems:
        raise DrillFailed("; ".join(problems))
