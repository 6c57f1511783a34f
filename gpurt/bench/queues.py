"""Desks sharing the slots (docs/scheduler.md, "Queues"): an urgent job past a backlog, equal shares, a cap that holds.

On one running platform whose request queues include ``BENCH_QUEUES``, as each queue's own principal publishes
(``Target.emulator_queue_tokens``), in three phases:

1. ``urgent``: ``backlog`` tiny batch jobs wait on one desk's queue; once they run, ``urgent_jobs`` urgent jobs are
   published one after another, each when the last one's result is back; each one's publish-to-start wait is
   the scheduler's own (``JobMetrics.queue_wait_s``: publish to its start on a worker).
2. ``share``: two desks of equal weight publish for ``window_s``, one ``FAST_FACTOR`` times faster, both faster than
   the platform runs them; each desk's share of the starts in the window comes from the scheduler's
   ``queue_started_total`` counters, and ``GET /status`` is sampled to tell whether both stayed backlogged.
3. ``cap``: a desk capped at ``CAPPED_SLOTS`` and an uncapped one are backlogged for ``cap_window_s``; ``GET /status``
   is sampled for the places the capped desk's jobs hold.

Each phase's leftover backlog is discarded at its end (its subscriptions sought to now, as an operator may), so
the next phase starts on empty queues.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from gpurt.bench.runtime.measure import percentile
from runtime.access.control_api import ApiClient
from runtime.access.target import Target
from runtime.access.transport import PubSubClients, ResultCollector, make_clients
from runtime.protocol.contract import METRICS
from runtime.protocol.messages import JobRequest, JobStatus
from runtime.protocol.queues import DEFAULT_QUEUE, URGENT_QUEUE, QueueSpec, request_subscription, with_built_ins
from runtime.pubsub.admin import subscription_path
from runtime.pubsub.publisher import TopicPublisher

BACKLOG_DESK: Final = "batch-desk"
FAST_DESK: Final = "fast-desk"
SLOW_DESK: Final = "slow-desk"
CAPPED_DESK: Final = "capped-desk"
CAPPED_SLOTS: Final = 1
# The queues the benchmark's platform runs: every desk of weight 1, one capped.
BENCH_QUEUES: Final = with_built_ins([QueueSpec(BACKLOG_DESK), QueueSpec(FAST_DESK), QueueSpec(SLOW_DESK),
                                      QueueSpec(CAPPED_DESK, max_slots=CAPPED_SLOTS)])
# The batch jobs (issue 45): 50 ms noops. They are tiny, so the scheduler packs them (docs/scheduler.md, "Packing").
BATCH_SLEEP_S: Final = 0.05
FAST_FACTOR: Final = 10
# The goals (issue 45): an urgent job's publish-to-start p95 at most this; equal weights each within these shares.
URGENT_P95_GOAL_S: Final = 1.0
SHARE_GOAL: Final = (0.45, 0.55)
# How often ``GET /status`` is sampled during the share and cap phases (seconds).
SAMPLE_PERIOD_S: Final = 0.1
# Publishers send in batches this often (seconds): a rate of messages per second, not one RPC each.
PUBLISH_TICK_S: Final = 0.1

Progress = Callable[[str, int], None]


@dataclass(frozen=True)
class UrgentFigures:
    """Phase 1: the urgent jobs' publish-to-start waits, and how much of the backlog was still waiting."""

    backlog: int
    waits_s: list[float]
    backlog_waiting_after: int  # batch messages still in the broker when the last urgent job was back

    @property
    def p50_s(self) -> float | None:
        """Median publish-to-start of an urgent job."""
        return percentile(self.waits_s, 50)

    @property
    def p95_s(self) -> float | None:
        """95th percentile publish-to-start of an urgent job."""
        return percentile(self.waits_s, 95)

    @property
    def met(self) -> bool:
        """Whether the p95 is within ``URGENT_P95_GOAL_S`` with a backlog still waiting behind."""
        return self.p95_s is not None and self.p95_s <= URGENT_P95_GOAL_S and self.backlog_waiting_after > 0


@dataclass(frozen=True)
class ShareFigures:
    """Phase 2: jobs published and started per desk in the window, and how often both were backlogged."""

    window_s: float
    published: dict[str, int]
    started: dict[str, float]
    both_backlogged: float  # share of the samples in which both desks had messages waiting on this replica

    def share(self, desk: str) -> float | None:
        """``desk``'s share of the two desks' starts in the window."""
        total = sum(self.started.values())
        return self.started.get(desk, 0.0) / total if total else None

    @property
    def met(self) -> bool:
        """Whether each desk's share is within ``SHARE_GOAL``."""
        low, high = SHARE_GOAL
        return all((s := self.share(desk)) is not None and low <= s <= high for desk in (FAST_DESK, SLOW_DESK))


@dataclass(frozen=True)
class CapFigures:
    """Phase 3: the most places the capped desk's jobs held in any sample, and the uncapped one's."""

    window_s: float
    cap: int
    most_capped: int
    most_uncapped: int
    samples: int
    started: dict[str, float] = field(default_factory=dict)

    @property
    def met(self) -> bool:
        """Whether the capped desk never held more than its cap."""
        return self.samples > 0 and self.most_capped <= self.cap


@dataclass(frozen=True)
class QueueFigures:
    """All three phases."""

    urgent: UrgentFigures
    share: ShareFigures
    cap: CapFigures

    @property
    def met(self) -> bool:
        """Whether every goal was met."""
        return self.urgent.met and self.share.met and self.cap.met


def measure(target: Target, *, backlog: int, urgent_jobs: int, window_s: float, slow_rate: float,
            cap_window_s: float, timeout_s: float, progress: Progress | None = None) -> QueueFigures:
    """Run the three phases against ``target``, whose queues must include ``BENCH_QUEUES``."""
    report = progress or (lambda phase, done: None)
    missing = sorted({q.name for q in BENCH_QUEUES if q.name != DEFAULT_QUEUE} - set(target.emulator_queue_tokens))
    if missing:
        raise RuntimeError(f"no broker token for the queue(s) {', '.join(missing)}: the benchmark needs a local "
                           "platform running its queues")
    with _Desks(target) as desks:
        urgent = _urgent(target, desks, backlog, urgent_jobs, timeout_s, report)
        share = _share(target, desks, window_s, slow_rate, report)
        cap = _cap(target, desks, cap_window_s, report)
    return QueueFigures(urgent, share, cap)


class _Desks:
    """Pub/Sub clients as each queue's principal publishes, and the operator's for discarding a backlog."""

    def __init__(self, target: Target) -> None:
        self._target = target
        self._clients: dict[str, PubSubClients] = {}
        self._api = ApiClient(target.api_url, target.token)

    def __enter__(self) -> _Desks:
        return self

    def __exit__(self, *exc: object) -> None:
        for clients in self._clients.values():
            clients.close()
        self._api.close()

    def queues(self) -> dict[str, dict[str, Any]]:
        """The scheduler's ``GET /status`` queues, by name."""
        return {str(queue.get("name")): dict(queue) for queue in self._api.status().get("queues", [])}

    def queue(self, name: str) -> dict[str, Any]:
        """``name``'s entry in the scheduler's ``GET /status`` queues."""
        found = self.queues().get(name)
        if found is None:
            raise RuntimeError(f"the scheduler reports no queue {name!r}: start the platform with the benchmark's "
                               "queues")
        return found

    def clients(self, queue: str) -> PubSubClients:
        """Clients with ``queue``'s token (``None``: the operator's)."""
        key = queue or ""
        if key not in self._clients:
            token = self._target.emulator_token if not queue else self._target.emulator_queue_tokens.get(queue)
            self._clients[key] = make_clients(self._target.project, self._target.emulator_host, token)
        return self._clients[key]

    def publish(self, queue: str, count: int, prefix: str, sleep_s: float = BATCH_SLEEP_S) -> list[str]:
        """Publish ``count`` noops on ``queue``; their job ids."""
        requests = [JobRequest.model_validate({"job_id": f"{prefix}-{uuid.uuid4().hex[:12]}", "type": "noop",
                                               "params": {"sleep_s": sleep_s}}) for _ in range(count)]
        TopicPublisher(self.clients(queue).publisher, self._target.project).publish_raw_requests(
            (request.to_message() for request in requests), queue=queue)
        return [request.job_id for request in requests]

    def discard(self, *queues: str) -> None:
        """Drop what waits on ``queues``' subscriptions: seek them to now (``roles/pubsub.editor`` on them)."""
        subscriber = self.clients("").subscriber
        now = datetime.now(UTC)
        for queue in queues:
            subscriber.seek(request={"subscription": subscription_path(self._target.project,
                                                                       request_subscription(queue)), "time": now})


def _urgent(target: Target, desks: _Desks, backlog: int, urgent_jobs: int, timeout_s: float,
            report: Progress) -> UrgentFigures:
    for done in range(0, backlog, 1000):
        desks.publish(BACKLOG_DESK, min(1000, backlog - done), "bench-queues-batch")
        report("backlog", min(backlog, done + 1000))
    _wait(lambda: desks.queue(BACKLOG_DESK).get("started", 0) > 0, timeout_s, "the backlog to start")
    waits: list[float] = []
    clients = desks.clients(URGENT_QUEUE)
    with ResultCollector(clients) as collector:
        for index in range(urgent_jobs):
            (job_id,) = desks.publish(URGENT_QUEUE, 1, "bench-queues-urgent", sleep_s=0.0)
            result = collector.wait([job_id], timeout_s).get(job_id)
            if result is None or result.status is not JobStatus.SUCCEEDED or result.metrics.queue_wait_s is None:
                raise RuntimeError(f"the benchmark's urgent job {job_id} did not succeed: {result}")
            waits.append(result.metrics.queue_wait_s)
            report("urgent", index + 1)
    waiting = _depth(target, BACKLOG_DESK)
    desks.discard(BACKLOG_DESK)
    return UrgentFigures(backlog, waits, waiting)


def _share(target: Target, desks: _Desks, window_s: float, slow_rate: float, report: Progress) -> ShareFigures:
    rates = {SLOW_DESK: slow_rate, FAST_DESK: FAST_FACTOR * slow_rate}
    published = dict.fromkeys(rates, 0)
    both: list[bool] = []
    with _publishing(desks, rates, published):
        # A head start, so that both desks have a backlog on this replica before the window opens.
        _wait(lambda: all(desks.queue(desk).get("waiting", 0) > 0 for desk in rates), 60, "both desks waiting")
        before = _started(target)
        began = time.monotonic()
        while (elapsed := time.monotonic() - began) < window_s:
            status = desks.queues()
            both.append(all(status.get(desk, {}).get("waiting", 0) > 0 for desk in rates))
            report("share", int(elapsed))
            time.sleep(SAMPLE_PERIOD_S)
        after = _started(target)
    desks.discard(*rates)
    started = {desk: after.get(desk, 0.0) - before.get(desk, 0.0) for desk in rates}
    return ShareFigures(window_s, published, started, sum(both) / len(both) if both else 0.0)


def _cap(target: Target, desks: _Desks, window_s: float, report: Progress) -> CapFigures:
    uncapped = SLOW_DESK
    most = {CAPPED_DESK: 0, uncapped: 0}
    samples = 0
    rates = {CAPPED_DESK: 200.0, uncapped: 200.0}
    with _publishing(desks, rates, dict.fromkeys(rates, 0)):
        before = _started(target)
        began = time.monotonic()
        while (elapsed := time.monotonic() - began) < window_s:
            status = desks.queues()
            for desk in most:
                most[desk] = max(most[desk], int(status.get(desk, {}).get("slots", 0)))
            samples += 1
            report("cap", int(elapsed))
            time.sleep(SAMPLE_PERIOD_S)
        after = _started(target)
    desks.discard(*rates)
    return CapFigures(window_s, CAPPED_SLOTS, most[CAPPED_DESK], most[uncapped], samples,
                      {desk: after.get(desk, 0.0) - before.get(desk, 0.0) for desk in rates})


@contextmanager
def _publishing(desks: _Desks, rates: Mapping[str, float], published: dict[str, int]) -> Iterator[None]:
    """Publish noops on each desk at its rate (per second) on a thread each, until the block ends."""
    stop = threading.Event()
    failures: list[BaseException] = []

    def run(desk: str, rate: float) -> None:
        owed = 0.0
        try:
            while not stop.wait(PUBLISH_TICK_S):
                owed += rate * PUBLISH_TICK_S
                if (count := int(owed)) > 0:
                    desks.publish(desk, count, f"bench-queues-{desk}")
                    published[desk] += count
                    owed -= count
        except BaseException as exc:  # surfaced to the caller below, not lost on a thread
            failures.append(exc)
    threads = [threading.Thread(target=run, args=item, name=f"bench-publish-{item[0]}", daemon=True)
               for item in rates.items()]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    if failures:
        raise RuntimeError(f"publishing failed: {failures[0]}") from failures[0]


def _started(target: Target) -> dict[str, float]:
    """Jobs started per queue since the scheduler started (its ``queue_started_total``, from ``GET /metrics``)."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{target.api_url}/metrics", timeout=10.0).text
    return {sample.labels["queue"]: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == METRICS.queue_started_total}


def _depth(target: Target, queue: str) -> int:
    """Messages waiting on ``queue``'s subscription, from the broker's admin statistics (-1: no admin view)."""
    from runtime.local.status import subscription_stats

    if target.emulator_admin_url is None:
        return -1
    return int(subscription_stats(target.emulator_admin_url, request_subscription(queue)).get("undelivered", -1))


def _wait(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(SAMPLE_PERIOD_S)
