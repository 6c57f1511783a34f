"""Soak mode of ``gpurt bench runtime --soak`` (docs/cli.md): a steady stream of jobs, one CSV row per result.

Each row: seconds since start, job id, end-to-end latency, queue wait, delivery attempt, retries seen so
far, and the dead-letter count at that moment (from the emulator's admin view), so a reviewer can see
latency drift, retry rates and DLQ behaviour over the run.
"""

from __future__ import annotations

import csv
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from components.contract import REQUEST_SUBSCRIPTION
from protocol.messages import JobRequest, JobResult
from runtime.bench.measure import percentile
from runtime.client.pubsub import ResultCollector, publish_request
from runtime.local.platform import LocalPlatform
from runtime.local.status import subscription_stats

CSV_COLUMNS: Final = ("t_s", "job_id", "status", "latency_s", "queue_wait_s", "attempt", "retries_total",
                      "dlq_count")
DRAIN_AFTER_S: Final = 60.0  # after the last publish, how long to wait for stragglers


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


def soak(platform: LocalPlatform, seconds: float, rate_per_s: float, csv_path: Path, sleep_s: float = 0.0,
         on_progress: Callable[[int, int], None] | None = None) -> SoakSummary:
    """Publish noop jobs at ``rate_per_s`` for ``seconds``; write one CSV row per result to ``csv_path``."""
    state = platform.running_state()
    run = uuid.uuid4().hex[:8]
    published: dict[str, float] = {}
    lock = threading.Lock()
    retries = 0
    completed = 0
    latencies: list[float] = []
    dlq_count = 0
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
                writer.writerow((f"{now - start:.3f}", result.job_id, result.status.value, f"{now - sent:.4f}",
                                 _opt(result.metrics.queue_wait_s), result.attempt, retries, dlq_count))

        def on_tick() -> None:
            nonlocal dlq_count
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
                    publish_request(clients, JobRequest.model_validate(
                        {"job_id": job_id, "type": "noop", "params": {"sleep_s": sleep_s}}))
                    on_tick()
                    next_at += interval
                    # Pacing to the requested rate, not waiting for an outcome.
                    time.sleep(max(0.0, next_at - time.perf_counter()))
                collector.wait(list(published), DRAIN_AFTER_S, on_tick=on_tick)
        finally:
            clients.close()
    return SoakSummary(published=len(published), completed=completed, retries=retries, dlq_count=dlq_count,
                       duration_s=time.perf_counter() - start, latency_p50_s=percentile(latencies, 50),
                       latency_p95_s=percentile(latencies, 95))


def _opt(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"
