"""The chaos drill's hostile-input row: a body built to be slow to parse, and requests under another job's id.

What a publisher without ill intent never sends, and an attacker does (docs/scheduler.md, "Whose result is
it"):

- a body of a quote and escaped quotes without a closing quote, the parser's old worst case (quadratic:
  minutes for this size, hours at the 1 MB limit), published with a victim's ``job_id`` attribute. It
  must be ``rejected`` under its own message id within ``ANSWER_WAIT_S`` while every replica keeps
  answering its health check within ``HEALTH_TIMEOUT_S``;
- a garbage body and a valid request for another job, each with the victim's ``job_id`` attribute:
  neither may produce a result for the victim, and the valid one is answered for its own job;
- then the victim's own request, which must run and succeed: its first and only result is ``succeeded``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from typing import Final

from runtime.access.control_api import ApiError
from runtime.access.transport import ResultCollector
from runtime.protocol import contract
from runtime.protocol.messages import JobResult, JobStatus
from validation.drills.base import POLL_S, DrillContext, DrillFailed
from validation.drills.faults import replica_apis

# Large enough that the old nesting scan took minutes on it, small enough to publish at once.
SLOW_BODY_BYTES: Final = 256_000
HEALTH_TIMEOUT_S: Final = 2.0  # a replica parsing a body must still answer its probes at once
ANSWER_WAIT_S: Final = 60.0
PUBLISH_TIMEOUT_S: Final = 30.0


def slow_body(size: int = SLOW_BODY_BYTES) -> bytes:
    """A quote, then escaped quotes up to ``size`` bytes, never closed."""
    return (b'"' + b'\\"' * (size // 2))[:size]


def run(ctx: DrillContext) -> None:
    """Publish the hostile messages, check the answers and the replicas' health; raises ``DrillFailed``."""
    victim, forger = ctx.job_id("hostile-victim", 0), ctx.job_id("hostile-forger", 0)
    forged = {"job_id": victim, "type": "noop"}
    lock = threading.Lock()
    seen: dict[str, list[JobResult]] = defaultdict(list)

    def record(result: JobResult) -> None:  # the subscriber's thread
        with lock:
            seen[result.job_id].append(result)

    clients = ctx.platform.pubsub()
    problems: list[str] = []
    try:
        with ResultCollector(clients, on_any=record) as collector:
            topic = clients.topic(contract.REQUEST_TOPIC)

            def publish(data: bytes, attributes: dict[str, str]) -> str:
                return str(clients.publisher.publish(topic, data, **attributes).result(timeout=PUBLISH_TIMEOUT_S))

            started = time.monotonic()
            slow = publish(slow_body(), forged)
            garbage = publish(b"\xff not a request", forged)
            publish(json.dumps({"job_id": forger, "type": "noop"}).encode(), forged)
            expected = {f"invalid-{slow}": JobStatus.REJECTED, f"invalid-{garbage}": JobStatus.REJECTED,
                        forger: JobStatus.SUCCEEDED}
            # Health is asked while the answers are awaited: a replica stuck parsing stops answering then.
            while True:
                unhealthy = _unhealthy(ctx)
                answers = collector.wait(set(expected), POLL_S)
                if unhealthy or len(answers) == len(expected) or time.monotonic() - started > ANSWER_WAIT_S:
                    break
            problems += unhealthy
            answered_s = time.monotonic() - started
            problems += [f"no result for {job} after {answered_s:.0f} s" for job in expected if job not in answers]
            problems += [f"{job} ended {answers[job].status.value}, not {status.value}"
                         for job, status in expected.items() if job in answers and answers[job].status is not status]
            with lock:
                forged_results = list(seen.get(victim, []))
            problems += [f"a {r.status.value} result for {victim}, from a message that only named it in its "
                         "attribute" for r in forged_results]
            publish(json.dumps({"job_id": victim, "type": "noop"}).encode(), forged)
            own = collector.wait({victim}, ANSWER_WAIT_S).get(victim)
            if own is None or own.status is not JobStatus.SUCCEEDED:
                problems.append(f"the victim's own request ended {own.status.value if own else 'without a result'}")
    finally:
        clients.close()
    ctx.figures["hostile input: answered within (s)"] = round(answered_s, 1)
    ctx.note(f"hostile input: a {SLOW_BODY_BYTES:,}-byte slow-to-parse body and two messages under another job's "
             f"attribute answered in {answered_s:.1f} s, for their own ids only; "
             f"{'problems: ' + '; '.join(problems) if problems else 'replicas stayed healthy'}")
    if problems:
        raise DrillFailed("hostile input: " + "; ".join(problems))


def _unhealthy(ctx: DrillContext) -> list[str]:
    """Replicas that do not answer ``/healthz`` within ``HEALTH_TIMEOUT_S`` now."""
    problems = []
    for name, api in replica_apis(ctx, timeout_s=HEALTH_TIMEOUT_S).items():
        with api:
            try:
                api.healthz()
            except ApiError as exc:
                problems.append(f"{name} did not answer its health check: {exc}")
    return problems
