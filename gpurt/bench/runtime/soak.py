"""Soak mode of ``gpurt bench runtime --soak`` (docs/cli.md): a steady stream of jobs, one CSV row per result.

Each row: seconds since start, job id, end-to-end latency, queue wait, delivery attempt, retries seen so
far, the dead-letter count at that moment (from the emulator's admin view) and the scheduler's resident
memory at its last sample, so a reviewer can see latency drift, retry rates, DLQ behaviour and memory
over the run (both read every 2 s). The summary says whether memory stayed flat: the growth per 10,000
jobs over the second half of the run (the first half warms caches and the allocator up), fitted by least
squares. With ``--tracemalloc`` the scheduler writes tracemalloc snapshots through the run
(runtime/scheduler/memory_trace.py) and the soak names the allocation sites that grew from the middle of
the run to its end: where a growth the trend shows comes from. With ``rejected_every`` N, every Nth message is
a request the scheduler rejects (``rejected_body``), so the trend covers the rejection path too: each rejected
request once kept about 5 KB plus its body for ever (issue 43).

The soak publishes through the Pub/Sub plumbing itself (``runtime.access.transport``), not the Python API's
``Client``: its rejected requests are bodies the Client refuses to send by design, and every result, the
rejections' included, is read as it comes to time each row.
"""

from __future__ import annotations

import csv
import json
import math
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import psutil

from gpurt.bench.runtime.measure import percentile
from runtime.access.transport import ResultCollector, publish_request
from runtime.local.platform import LocalPlatform
from runtime.local.status import subscription_stats
from runtime.protocol.contract import REQUEST_SUBSCRIPTION, SchedulerEnv
from runtime.protocol.messages import JobRequest, JobResult
from runtime.scheduler.memory_trace import format_growth, snapshots, top_growth

CSV_COLUMNS: Final = ("t_s", "job_id", "status", "latency_s", "queue_wait_s", "attempt", "retries_total",
                      "dlq_count", "scheduler_rss_mb")
DRAIN_AFTER_S: Final = 60.0  # after the last publish, how long to wait for stragglers
RSS_SAMPLE_S: Final = 2.0  # how often the scheduler's resident memory and the dead-letter count are read
# Memory counts as flat while it grows by less than this per 10,000 jobs in the run's second half: well
# under the 13 MB per 10,000 jobs a per-job leak once cost, above what allocator noise moves.
FLAT_MB_PER_10K_JOBS: Final = 2.0
# Fewer completed jobs than this in the second half tell nothing about a per-job leak.
MIN_TREND_JOBS: Final = 1000
JOBS_PER_TREND_UNIT: Final = 10_000
# With --tracemalloc: about this many snapshots over a run, each at most a minute apart and at least a few
# seconds (taking one stops the scheduler for a moment).
TRACE_SNAPSHOTS: Final = 12
TRACE_PERIOD_BOUNDS_S: Final = (5.0, 60.0)
# A traced scheduler starts its Dask cluster several times slower (every allocation is recorded): on a
# loaded 2-core machine it missed the platform's usual start-up budget.
TRACE_READY_TIMEOUT_S: Final = 600.0
# Characters of the unknown params key a rejected request carries: enough that a rejection kept for ever shows
# in the scheduler's resident memory within a thousand requests, far below the 1 MB body limit.
REJECTED_PADDING: Final = 32_000


@dataclass(frozen=True)
class RssSample:
    """The scheduler's resident memory after ``completed`` results."""

    t_s: float
    completed: int
    rss_mb: float


@dataclass(frozen=True)
class RssTrend:
    """How the scheduler's memory moved: first and last sample, and the fitted growth of the second half."""

    first_mb: float | None
    last_mb: float | None
    mb_per_10k_jobs: float | None  # None: too few jobs in the second half to tell
    flat: bool | None

    def verdict(self) -> str:
        """One line for people."""
        if self.first_mb is None or self.last_mb is None:
            return "not measured (no scheduler process found)"
        span = f"{self.first_mb:.0f} -> {self.last_mb:.0f} MB"
        if self.mb_per_10k_jobs is None:
            return f"{span}; too few jobs to tell a trend (at least {2 * MIN_TREND_JOBS} needed)"
        word = "flat" if self.flat else "GROWING"
        return f"{span}; {word}: {self.mb_per_10k_jobs:+.1f} MB per 10,000 jobs over the second half"


def rss_trend(samples: list[RssSample]) -> RssTrend:
    """The least-squares growth of RSS per 10,000 jobs over the samples of the run's second half (by jobs)."""
    if not samples:
        return RssTrend(None, None, None, None)
    first, last = samples[0].rss_mb, samples[-1].rss_mb
    half = samples[-1].completed / 2
    tail = [s for s in samples if s.completed >= half]
    xs = [float(s.completed) for s in tail]
    if len(tail) < 2 or xs[-1] - xs[0] < MIN_TREND_JOBS:
        return RssTrend(first, last, None, None)
    mean_x = math.fsum(xs) / len(xs)
    mean_y = math.fsum(s.rss_mb for s in tail) / len(tail)
    sxx = math.fsum((x - mean_x) ** 2 for x in xs)
    sxy = math.fsum((x - mean_x) * (s.rss_mb - mean_y) for x, s in zip(xs, tail, strict=True))
    slope = sxy / sxx * JOBS_PER_TREND_UNIT
    return RssTrend(first, last, slope, slope < FLAT_MB_PER_10K_JOBS)


@dataclass(frozen=True)
class SoakSummary:
    """Totals of a soak run."""

    published: int
    completed: int
    retries: int
    dlq_count: int
    duration_s: float
    latency_p50_s: float | None
    latency_p95_s: float | None
    rss: RssTrend


def rejected_body(job_id: str, padding: int = REJECTED_PADDING) -> bytes:
    """A noop request the scheduler rejects under ``job_id``: its params carry an unknown key of ``padding``
    characters, refused by the params model (the validation path whose error once leaked, with the body)."""
    return json.dumps({"job_id": job_id, "type": "noop", "params": {"padding": "x" * padding}}).encode()


def soak(platform: LocalPlatform, seconds: float, rate_per_s: float, csv_path: Path, sleep_s: float = 0.0,
         on_progress: Callable[[int, int], None] | None = None, rejected_every: int = 0) -> SoakSummary:
    """Publish noop jobs at ``rate_per_s`` for ``seconds``; write one CSV row per result to ``csv_path``.

    With ``rejected_every`` N > 0, every Nth message is a ``rejected_body`` instead, answered ``rejected``.
    """
    state = platform.running_state()
    run = uuid.uuid4().hex[:8]
    published: dict[str, float] = {}
    lock = threading.Lock()
    retries = 0
    completed = 0
    latencies: list[float] = []
    dlq_count = 0
    schedulers = _scheduler_processes(platform)
    rss_samples: list[RssSample] = []
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    clients = platform.pubsub()
    start = time.perf_counter()
    with open(csv_path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)

        def on_result(result: JobResult) -> None:  # runs on the subscriber's thread
            nonlocal retries, completed
            with lock:  # the subscriber may call back from several threads; rows stay in time order
                now = time.perf_counter()
                retries += result.attempt - 1
                completed += 1
                sent = published.get(result.job_id, now)
                latencies.append(now - sent)
                rss = f"{rss_samples[-1].rss_mb:.1f}" if rss_samples else ""
                writer.writerow((f"{now - start:.3f}", result.job_id, result.status.value, f"{now - sent:.4f}",
                                 _opt(result.metrics.queue_wait_s), result.attempt, retries, dlq_count, rss))

        sampled_at = -RSS_SAMPLE_S

        def on_tick() -> None:
            nonlocal dlq_count, sampled_at
            now = time.perf_counter() - start
            # Sampled, not read per job: an HTTP request per publish held the publish rate down.
            if now - sampled_at >= RSS_SAMPLE_S:
                sampled_at = now
                if schedulers:
                    rss_mb = _rss_mb(schedulers)
                    with lock:
                        rss_samples.append(RssSample(now, completed, rss_mb))
                if state.emulator_admin_url:
                    stats = subscription_stats(state.emulator_admin_url, REQUEST_SUBSCRIPTION)
                    with lock:
                        dlq_count = int(stats.get("dead_lettered", 0))
            if on_progress:
                on_progress(len(published), completed)

        try:
            with ResultCollector(clients, on_any=on_result) as collector:
                interval = 1.0 / rate_per_s
                next_at = start
                while time.perf_counter() - start < seconds:
                    job_id = f"soak-{run}-{len(published)}"
                    with lock:
                        published[job_id] = time.perf_counter()
                    if rejected_every and len(published) % rejected_every == 0:
                        publish_request(clients, rejected_body(job_id), {"job_id": job_id, "type": "noop"})
                    else:
                        publish_request(clients, JobRequest.model_validate(
                            {"job_id": job_id, "type": "noop", "params": {"sleep_s": sleep_s}}))
                    on_tick()
                    next_at += interval
                    # Pacing to the requested rate, not waiting for an outcome.
                    time.sleep(max(0.0, next_at - time.perf_counter()))
                collector.wait(list(published), DRAIN_AFTER_S, on_tick=on_tick)
                if schedulers:  # the end of the run, so the trend reaches its last job
                    rss_samples.append(RssSample(time.perf_counter() - start, completed, _rss_mb(schedulers)))
        finally:
            clients.close()
    return SoakSummary(published=len(published), completed=completed, retries=retries, dlq_count=dlq_count,
                       duration_s=time.perf_counter() - start, latency_p50_s=percentile(latencies, 50),
                       latency_p95_s=percentile(latencies, 95), rss=rss_trend(rss_samples))


def scheduler_rss_mb(platform: LocalPlatform) -> float | None:
    """The resident memory of the platform's scheduler replicas together (MB); None when none is found."""
    processes = _scheduler_processes(platform)
    return _rss_mb(processes) if processes else None


def _scheduler_processes(platform: LocalPlatform) -> list[psutil.Process]:
    """The scheduler replicas' processes (each holds its Dask scheduler too; the workers are children)."""
    found = []
    for record in platform.running_state().schedulers():
        try:
            process = psutil.Process(record.pid)
        except psutil.NoSuchProcess:
            continue
        if abs(process.create_time() - record.create_time) < 1.0:  # not a recycled pid
            found.append(process)
    return found


def _rss_mb(processes: list[psutil.Process]) -> float:
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total / 2**20


def _opt(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def tracemalloc_env(directory: Path, seconds: float) -> dict[str, str]:
    """Scheduler settings that make it write snapshots to ``directory`` through a soak of ``seconds``, all kept."""
    low, high = TRACE_PERIOD_BOUNDS_S
    period = min(high, max(low, seconds / TRACE_SNAPSHOTS))
    return {SchedulerEnv.TRACEMALLOC_DIR: str(directory), SchedulerEnv.TRACEMALLOC_PERIOD_S: f"{period:g}",
            SchedulerEnv.TRACEMALLOC_KEEP: str(10_000)}


def soak_growth(directory: Path, limit: int = 15) -> str:
    """The allocation sites that grew from the middle of the soak to its newest snapshot, for people.

    Read while the platform still runs: the snapshot the scheduler writes as it exits comes after Dask's
    cluster is closed, so it would hide what the run kept. The middle, not the first: the first half warms
    caches up, as the RSS trend also leaves it out.
    """
    taken = snapshots(directory)
    if len(taken) < 3:
        return f"tracemalloc: only {len(taken)} snapshot(s) in {directory}; run the soak longer"
    early, late = taken[len(taken) // 2], taken[-1]
    return format_growth(top_growth(early, late, limit), early, late)
