"""The scheduler's Prometheus series, named by the contract and registered on an injectable registry."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from runtime.protocol.contract import METRICS

# Job run times span a no-op (milliseconds) to the 30-minute p95 completion SLO.
DURATION_BUCKETS_S: Final = (0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600)
# Queue wait: the queue-wait SLO is p95 < 5 minutes, so resolve well around 300 s.
QUEUE_WAIT_BUCKETS_S: Final = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
# ``GET /status`` reports each queue's wait p95 and share of starts over this recent window (seconds): long enough
# for a p95 of a few hundred starts, short enough to show what a change of load did minutes ago.
RECENT_STARTS_S: Final = 300.0
# At most this many starts are kept for that window (a burst of tiny jobs starts thousands a minute).
RECENT_STARTS_MAX: Final = 20_000


def _bare(name: str) -> str:
    # prometheus-client appends `_total` to counters itself.
    return name.removesuffix("_total")


class SchedulerMetrics:
    """Every series the scheduler exports; pass a fresh ``CollectorRegistry`` in tests."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.jobs = Counter(_bare(METRICS.jobs_total), "Terminal job results by type and status.",
                            ["type", "status"], registry=r)
        self.duration = Histogram(METRICS.job_duration_seconds, "Run time of executed jobs.", ["type"],
                                  buckets=DURATION_BUCKETS_S, registry=r)
        self.queue_wait = Histogram(METRICS.queue_wait_seconds, "Publish-to-start wait of job requests, per "
                                    "request queue.", ["queue"], buckets=QUEUE_WAIT_BUCKETS_S, registry=r)
        self.queue_started = Counter(_bare(METRICS.queue_started_total), "Jobs started per request queue (counted as "
                                     "their run is concluded, with its publish-to-start wait).",
                                     ["queue"], registry=r)
        self.queue_slots = Gauge(METRICS.queue_slots, "Places on the workers a request queue's jobs hold now "
                                 "on this replica (running or submitted ahead).", ["queue"], registry=r)
        self.queue_depth = Gauge(METRICS.queue_depth, "Undelivered messages on a request queue's scheduler "
                                 "subscription.", ["queue"], registry=r)
        self.recent_starts = RecentStarts()
        self.in_flight = Gauge(METRICS.jobs_in_flight, "Jobs this replica is processing now.", registry=r)
        self.backlog = Gauge(METRICS.backlog_messages, "Undelivered messages on the request subscription.",
                             registry=r)
        self.dlq = Gauge(METRICS.dlq_messages, "Messages waiting in the request dead-letter queue.", registry=r)
        self.retries = Counter(_bare(METRICS.job_retries_total), "Redeliveries seen (delivery attempt > 1).",
                               ["type"], registry=r)
        self.cache_hits = Counter(_bare(METRICS.result_cache_hits_total), "Requests answered from the result "
                                  "cache, without a run.", ["type"], registry=r)
        self.cache_misses = Counter(_bare(METRICS.result_cache_misses_total), "Requests that looked in the result "
                                    "cache, found nothing and ran.", ["type"], registry=r)
        self.spills = Counter(_bare(METRICS.job_spills_total), "Jobs that waited past the overflow budget for a "
                              "GKE GPU and ran on Vertex AI instead.", ["type"], registry=r)
        self.pool_workers = Gauge(METRICS.pool_workers, "Workers per pool.", ["pool"], registry=r)
        self.evictions = Counter(_bare(METRICS.pool_evictions_total), "Pools stopped (evicted) by request.",
                                 ["pool"], registry=r)
        self.leader = Gauge(METRICS.leader, "1 while this replica holds the leader lease.", registry=r)
        self.maintenance = Gauge(METRICS.maintenance_mode, "1 while intake is drained.", registry=r)
        self.reclaimer_errors = Counter(_bare(METRICS.reclaimer_errors_total), "Failed DLQ reclaimer runs.",
                                        registry=r)
        self.election_failures = Counter(_bare(METRICS.leader_election_failures_total),
                                         "Lease acquire/renew calls that failed.", registry=r)

    def export_queues(self, queues: Iterable[str]) -> None:
        """Each queue's series at zero from the start: a series first seen at 1 has no earlier sample, so
        Prometheus' ``rate()`` and ``increase()`` would miss what created it (a wait p95 alert, a share)."""
        for queue in queues:
            self.queue_wait.labels(queue)
            self.queue_started.labels(queue)
            self.queue_slots.labels(queue).set(0)

    def job_started(self, queue: str, wait_s: float) -> None:
        """A job of ``queue`` started on its worker ``wait_s`` seconds after it was published."""
        self.queue_wait.labels(queue).observe(wait_s)
        self.queue_started.labels(queue).inc()
        self.recent_starts.add(queue, wait_s)

    def result_cache(self) -> dict[str, float]:
        """Result cache hits and misses of this replica since it started, over every job type (``GET /status``)."""
        return {"hits": _total(self.cache_hits), "misses": _total(self.cache_misses)}


def _total(counter: Counter) -> float:
    """A counter's value summed over its labels."""
    return sum(sample.value for family in counter.collect() for sample in family.samples
               if sample.name.endswith("_total"))


class RecentStarts:
    """The starts of the last ``RECENT_STARTS_S`` per queue, for their wait p95 and share in ``GET /status``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._starts: deque[tuple[float, str, float]] = deque(maxlen=RECENT_STARTS_MAX)  # (when, queue, wait)

    def add(self, queue: str, wait_s: float) -> None:
        """Record one start."""
        with self._lock:
            self._starts.append((self._clock(), queue, wait_s))

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per queue that started a job in the window: ``started``, ``wait_p95_s`` and ``share`` of all starts."""
        with self._lock:
            horizon = self._clock() - RECENT_STARTS_S
            while self._starts and self._starts[0][0] < horizon:
                self._starts.popleft()
            starts = list(self._starts)
        waits: dict[str, list[float]] = {}
        for _, queue, wait_s in starts:
            waits.setdefault(queue, []).append(wait_s)
        return {queue: {"started": len(values), "wait_p95_s": round(_p95(values), 3),
                        "share": round(len(values) / len(starts), 3)} for queue, values in waits.items()}


def _p95(values: list[float]) -> float:
    """The 95th percentile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * 95 // 100) - 1)]
