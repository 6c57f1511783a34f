"""The chaos drill's forgery rows: the broker's own refusal, then a forged result and a forged dead letter.

- **local forgery**: what it takes to forge a result on the local platform is to read a victim's request and
  publish a matching result. The builtin broker lets only the scheduler do either (docs/local-platform.md,
  "Who may reach what"): a user's token may not pull the request subscription, attach a subscription to
  the request topic or publish to the result topic, and a caller without a token may do nothing. Every
  such call must be refused (on the official emulator, which takes no credentials, the drill reports that
  they went through instead of judging them).

The two rows after it publish as the platform's operator, who may publish anywhere, so these are what the
result digests and the reclaimer's attribute check must stop (docs/scheduler.md, "Whose result is it"):

- **forged result**: while the victim's request (a noop of ``VICTIM_SLEEP_S``) runs, a ``succeeded`` result
  with an estimate of 42 and a digest of no body goes out on the result topic, and a bogus request under the
  victim's id on the request topic. A client that takes only the result answering its own body (as the
  Python client and ``gpurt submit --wait`` do) must get the victim's own ``succeeded`` result, and the store
  must hold that one too;
- **forged dead letter**: a valid request naming a second victim, published straight to the dead-letter
  topic without Pub/Sub's dead-letter attributes, must not make the leader store ``failed`` for it. Once the
  leader's reclaimer has refused it (its log names the message), the victim's own request must run and
  succeed. The drill then takes its forged message out of the dead-letter queue.

- **relabelled result**: a european call at strike 1 runs under a third victim's id first; then the victim's
  own request for strike 100 goes out. The victim's client must get the ``rejected`` conflict naming its own
  body (the id already ended for another computation), never the strike-1 price under its digest.

Nothing may be lost (each victim gets a result) and no client may see a wrong answer.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Final

from google.api_core import exceptions as gexc

from runtime.access.control_api import ApiError
from runtime.access.transport import TEMP_SUBSCRIPTION_PREFIX, PubSubClients, ResultCollector, make_clients
from runtime.protocol import contract
from runtime.protocol.messages import ErrorKind, JobResult, JobStatus, request_digest
from validation.drills.base import DrillContext, DrillFailed, take_dead_letters, wait_for

VICTIM_SLEEP_S: Final = 2.0  # long enough that the forgeries arrive while the victim's job runs
FORGED_ESTIMATE: Final = 42.0
ANSWER_WAIT_S: Final = 60.0
PUBLISH_TIMEOUT_S: Final = 30.0
# The relabel: the same option at two strikes; few paths, a kernel the chaos load has already compiled.
RELABEL_STRIKES: Final = (1.0, 100.0)
RELABEL_PATHS: Final = 2_000
# What the reclaimer logs when it refuses a dead letter (runtime/scheduler/reclaimer.py).
REFUSAL_LOG: Final = "not a valid request or not Pub/Sub's"


def run(ctx: DrillContext) -> None:
    """The forgeries in turn; raises ``DrillFailed`` with every problem found."""
    problems = local_forgery(ctx) + forged_result(ctx) + forged_dead_letter(ctx) + relabelled_result(ctx)
    if problems:
        raise DrillFailed("forgeries: " + "; ".join(problems))


def local_forgery(ctx: DrillContext) -> list[str]:
    """A user's token and no token at all try to read requests and publish a result; returns the problems."""
    victim = ctx.job_id("local-forgery-victim", 0)
    state = ctx.state
    user, stranger = ctx.platform.pubsub(as_user=True), make_clients(state.project, state.emulator_host)
    tap = user.subscription(f"{TEMP_SUBSCRIPTION_PREFIX}{victim}")
    forged = JobResult(job_id=victim, status=JobStatus.SUCCEEDED, result={"estimate": FORGED_ESTIMATE},
                       request_digest="0" * 64).model_dump_json().encode()
    attempts: dict[str, Callable[[], object]] = {
        "a user pulls the request subscription": lambda: _pull_and_release(user, contract.REQUEST_SUBSCRIPTION),
        "a user attaches a subscription to the request topic": lambda: _attach_and_remove(user, tap),
        "a user publishes a result": lambda: user.publisher.publish(
            user.topic(contract.RESULT_TOPIC), forged, job_id=victim, status="succeeded").result(
            timeout=PUBLISH_TIMEOUT_S),
        "no token pulls the request subscription": lambda: _pull_and_release(stranger, contract.REQUEST_SUBSCRIPTION),
        "no token publishes a result": lambda: stranger.publisher.publish(
            stranger.topic(contract.RESULT_TOPIC), forged, job_id=victim, status="succeeded").result(
            timeout=PUBLISH_TIMEOUT_S),
    }
    allowed = []
    try:
        for what, attempt in attempts.items():
            try:
                attempt()
            except (gexc.PermissionDenied, gexc.Unauthenticated):
                continue
            allowed.append(what)
    finally:
        user.close()
        stranger.close()
    ctx.figures["local forgery: calls refused"] = f"{len(attempts) - len(allowed)} of {len(attempts)}"
    if not ctx.platform.broker_checks_credentials():
        ctx.note(f"local forgery: this broker takes no credentials (Google's emulator, or a platform started by an "
                 f"older gpurt), so it let through: {', '.join(allowed) or 'nothing'} (the platform trusts "
                 f"everyone on this machine)")
        return []
    ctx.note(f"local forgery: the broker refused {len(attempts) - len(allowed)} of {len(attempts)} calls "
             f"a forger needs ({'; '.join(attempts)})")
    return [f"local forgery: the broker let this through: {what}" for what in allowed]


def _pull_and_release(clients: PubSubClients, subscription: str) -> None:
    """Pull what waits and hand it straight back, so a broker that wrongly allows this steals no job."""
    path = clients.subscription(subscription)
    response = clients.subscriber.pull(subscription=path, max_messages=1, timeout=PUBLISH_TIMEOUT_S)
    ack_ids = [received.ack_id for received in response.received_messages]
    if ack_ids:
        clients.subscriber.modify_ack_deadline(subscription=path, ack_ids=ack_ids, ack_deadline_seconds=0)


def _attach_and_remove(clients: PubSubClients, subscription: str) -> None:
    """Attach ``subscription`` to the request topic and, if the broker allowed it, remove it again."""
    clients.subscriber.create_subscription(name=subscription, topic=clients.topic(contract.REQUEST_TOPIC),
                                           timeout=PUBLISH_TIMEOUT_S)
    clients.subscriber.delete_subscription(subscription=subscription, timeout=PUBLISH_TIMEOUT_S)


def forged_result(ctx: DrillContext) -> list[str]:
    """A forged result and a bogus request under a running job's id; returns the problems found."""
    victim = ctx.job_id("forged-result-victim", 0)
    body = json.dumps({"job_id": victim, "type": "noop", "params": {"sleep_s": VICTIM_SLEEP_S}}).encode()
    digest = request_digest(body)
    seen: dict[str, list[JobResult]] = defaultdict(list)
    lock = threading.Lock()

    def record(result: JobResult) -> None:  # the subscriber's thread
        with lock:
            seen[result.job_id].append(result)

    problems: list[str] = []
    clients = ctx.platform.pubsub()
    try:
        with ResultCollector(clients, on_any=record) as client:
            requests, results = clients.topic(contract.REQUEST_TOPIC), clients.topic(contract.RESULT_TOPIC)
            attributes = {"job_id": victim, "type": "noop"}
            clients.publisher.publish(requests, body, **attributes).result(timeout=PUBLISH_TIMEOUT_S)
            forged = JobResult(
                job_id=victim, status=JobStatus.SUCCEEDED, result={"estimate": FORGED_ESTIMATE}, request_digest="0" * 64
            )
            clients.publisher.publish(
                results, forged.model_dump_json().encode(), job_id=victim, status="succeeded"
            ).result(timeout=PUBLISH_TIMEOUT_S)
            clients.publisher.publish(
                requests, json.dumps({"job_id": victim, "type": "bogus"}).encode(), **attributes
            ).result(timeout=PUBLISH_TIMEOUT_S)
            own = client.wait({victim}, ANSWER_WAIT_S, digests={victim: digest}).get(victim)
    finally:
        clients.close()
    with lock:
        on_the_topic = list(seen.get(victim, []))
    if own is None:
        problems.append(f"forged result: the victim {victim} got no result of its own in {ANSWER_WAIT_S:.0f} s")
    elif own.status is not JobStatus.SUCCEEDED or (own.result or {}).get("estimate") == FORGED_ESTIMATE:
        problems.append(f"forged result: the victim's client took a {own.status.value} result")
    problems += _stored(ctx, victim, digest, "forged result")
    ctx.figures["forged result: results on the topic for the victim"] = len(on_the_topic)
    ctx.note(
        f"forged result: {len(on_the_topic)} result(s) for {victim} reached the result topic (a forged "
        f"`succeeded` 42, the `rejected` answer to a bogus body, its own); the client matching its digest took "
        f"{own.status.value + ' (its own)' if own else 'none'}"
    )
    return problems


def forged_dead_letter(ctx: DrillContext) -> list[str]:
    """A valid request naming a victim, published straight to the dead-letter topic; returns the problems."""
    victim = ctx.job_id("forged-dead-letter-victim", 0)
    body = json.dumps({"job_id": victim, "type": "noop"}).encode()
    digest = request_digest(body)
    attributes = {"job_id": victim, "type": "noop"}
    problems: list[str] = []
    clients = ctx.platform.pubsub()
    try:
        forged_id = str(
            clients.publisher.publish(clients.topic(contract.REQUEST_DLQ_TOPIC), body, **attributes).result(
                timeout=PUBLISH_TIMEOUT_S
            )
        )
        # The leader's reclaimer looks at the DLQ every few seconds: the victim's request goes out only after it
        # refused the forgery, which is when a forgery would have stored `failed` for it.
        refused_s = wait_for(
            lambda: _logged_refusal(ctx, forged_id),
            ANSWER_WAIT_S,
            f"the leader's reclaimer to refuse the forged dead letter {forged_id}",
        )
        with ResultCollector(clients) as client:
            clients.publisher.publish(clients.topic(contract.REQUEST_TOPIC), body, **attributes).result(
                timeout=PUBLISH_TIMEOUT_S
            )
            own = client.wait({victim}, ANSWER_WAIT_S, digests={victim: digest}).get(victim)
    finally:
        clients.close()
    if own is None or own.status is not JobStatus.SUCCEEDED:
        problems.append(
            f"forged dead letter: the victim's own request ended {own.status.value if own else 'without a result'}"
        )
    problems += _stored(ctx, victim, digest, "forged dead letter")
    # the reclaimer may hold the message for a moment (it pulls, then releases it): look until it is taken
    removed = 0

    def taken() -> bool:
        nonlocal removed
        removed += take_dead_letters(ctx, {victim})
        return removed > 0

    with contextlib.suppress(DrillFailed):
        wait_for(taken, ANSWER_WAIT_S, "the forged dead letter to be taken out of the DLQ")
    if not removed:
        problems.append(f"forged dead letter: the drill could not take its message {forged_id} out of the DLQ")
    ctx.figures["forged dead letter: refused by the reclaimer after (s)"] = round(refused_s, 1)
    ctx.note(
        f"forged dead letter: a valid request for {victim} published straight to "
        f"{contract.REQUEST_DLQ_TOPIC} was refused by the reclaimer after {refused_s:.1f} s (no dead-letter "
        f"attributes); the victim's own request then ended {own.status.value if own else 'without a result'}; "
        f"{removed} forged message(s) taken out of the DLQ"
    )
    return problems


def relabelled_result(ctx: DrillContext) -> list[str]:
    """Another computation run under a victim's id before the victim's own request; returns the problems."""
    victim = ctx.job_id("relabel-victim", 0)
    attacker_strike, victim_strike = RELABEL_STRIKES
    bodies = [json.dumps({"job_id": victim, "type": "european_option",
                          "params": {"strike": strike, "paths": RELABEL_PATHS, "seed": 1}}).encode()
              for strike in RELABEL_STRIKES]
    attributes = {"job_id": victim, "type": "european_option"}
    answers: list[JobResult | None] = []
    clients = ctx.platform.pubsub()
    try:
        for body in bodies:  # the attacker's first: it must have ended before the victim asks
            # A collector of its own for each: one keeps the first result it took for the id.
            with ResultCollector(clients) as client:
                clients.publisher.publish(clients.topic(contract.REQUEST_TOPIC), body, **attributes).result(
                    timeout=PUBLISH_TIMEOUT_S)
                answers.append(client.wait({victim}, ANSWER_WAIT_S, digests={victim: request_digest(body)}).get(victim))
    finally:
        clients.close()
    ran, own = answers
    problems = []
    if ran is None or ran.status is not JobStatus.SUCCEEDED:
        problems.append(f"relabel: the strike-{attacker_strike:g} job under {victim} ended "
                        f"{ran.status.value if ran else 'without a result'}")
    if own is None:
        problems.append(f"relabel: the victim {victim} got no result of its own in {ANSWER_WAIT_S:.0f} s")
    elif own.status is not JobStatus.REJECTED or own.error is None or own.error.kind is not ErrorKind.CONFLICT:
        problems.append(f"relabel: the victim's strike-{victim_strike:g} request was answered {own.status.value} "
                        f"{own.result or ''} (the strike-{attacker_strike:g} result under its digest), not a conflict")
    answered = "never" if own is None else own.status.value + (f" ({own.error.kind.value})" if own.error else "")
    ctx.note(f"relabel: strike {attacker_strike:g} ran under {victim} first; the victim's strike-{victim_strike:g} "
             f"request was answered {answered}")
    return problems


def _stored(ctx: DrillContext, job_id: str, digest: str, row: str) -> list[str]:
    """What the store says of ``job_id``: its own succeeded result, or the problem."""
    with ctx.api() as api:
        try:
            state = api.get_job(job_id)
        except ApiError as exc:
            return [f"{row}: GET /jobs/{job_id} failed: {exc}"]
    result = state.result
    if result is None or result.status is not JobStatus.SUCCEEDED or result.request_digest != digest:
        return [
            f"{row}: the store holds {result.status.value if result else 'no result'} for {job_id}, not the "
            "victim's own success"
        ]
    return []


def _logged_refusal(ctx: DrillContext, message_id: str) -> bool:
    """Whether a scheduler replica logged that its reclaimer refused dead letter ``message_id``."""
    for record in ctx.state.schedulers():
        with contextlib.suppress(OSError):
            for line in Path(record.log_path).read_text(encoding="utf-8", errors="replace").splitlines():
                if REFUSAL_LOG in line and f'"{message_id}"' in line:
                    return True
    return False
