"""``gpurt bench runtime``: end-to-end noop throughput and queue wait, and the scheduler's own overhead.

End to end, a batch of ``noop`` jobs goes request topic → emulator → scheduler → Dask LocalCluster →
result topic, timed from the first publish to the last result. The same batch is then submitted straight
to a Dask LocalCluster of the same size in this process (the "backend alone"); the difference per job is
what the scheduler and Pub/Sub add, and the ratio of the two throughputs says how much of the backend's
capacity the platform keeps.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from runtime.bench.measure import percentile
from runtime.client.pubsub import ResultCollector, publish_request
from runtime.local.platform import LocalPlatform
from runtime.protocol import JobRequest, JobResult, JobStatus

RESULT_TIMEOUT_S: Final = 600.0  # a batch that has not finished by then is reported as incomplete


@dataclass(frozen=True)
class RuntimeFigures:
    """What one run measured (seconds unless named otherwise)."""

    jobs: int
    completed: int
    workers: int
    e2e_wall_s: float
    e2e_jobs_per_s: float
    queue_wait_p50_s: float | None
    queue_wait_p95_s: float | None
    latency_p50_s: float | None
    latency_p95_s: float | None
    direct_wall_s: float
    direct_jobs_per_s: float

    @property
    def overhead_per_job_s(self) -> float:
        """Extra wall time per job the platform adds over the backend alone."""
        return (self.e2e_wall_s - self.direct_wall_s) / max(self.jobs, 1)

    @property
    def throughput_ratio(self) -> float:
        """Backend-alone jobs/s divided by end-to-end jobs/s (1.0 = no overhead)."""
        return self.direct_jobs_per_s / self.e2e_jobs_per_s if self.e2e_jobs_per_s else float("inf")


@dataclass(frozen=True)
class EndToEnd:
    """The end-to-end phase: wall time from first publish to last result, and per-job timings."""

    wall_s: float
    queue_waits_s: list[float]
    latencies_s: list[float]
    completed: int


def run_end_to_end(platform: LocalPlatform, jobs: int, on_progress: Callable[[int], None] | None = None) -> EndToEnd:
    """Publish ``jobs`` noop requests at once and collect their results."""
    run = uuid.uuid4().hex[:8]
    requests = [JobRequest.model_validate({"job_id": f"bench-{run}-{i}", "type": "noop"}) for i in range(jobs)]
    published: dict[str, float] = {}
    arrived: dict[str, float] = {}

    def on_result(result: JobResult) -> None:
        arrived[result.job_id] = time.perf_counter()
        if on_progress:
            on_progress(len(arrived))

    clients = platform.pubsub()
    try:
        with ResultCollector(clients) as collector:
            start = time.perf_counter()
            for request in requests:
                published[request.job_id] = time.perf_counter()
                publish_request(clients, request)
            results = collector.wait(published, RESULT_TIMEOUT_S, on_result=on_result)
    finally:
        clients.close()
    done = [r for r in results.values() if r.status is JobStatus.SUCCEEDED]
    wall = (max(arrived.values()) - start) if arrived else float("nan")
    waits = [r.metrics.queue_wait_s for r in done if r.metrics.queue_wait_s is not None]
    latencies = [arrived[r.job_id] - published[r.job_id] for r in done]
    return EndToEnd(wall, waits, latencies, len(done))


def run_backend_alone(jobs: int, workers: int) -> float:
    """Wall seconds for ``jobs`` noop jobs submitted straight to a LocalCluster of ``workers`` workers."""
    from distributed import Client, LocalCluster

    from kernels.jobs import run_job

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        client.gather(client.map(run_job, ["noop"] * workers, [{}] * workers, pure=False))  # warm the workers
        start = time.perf_counter()
        futures = client.map(run_job, ["noop"] * jobs, [{}] * jobs, pure=False)
        client.gather(futures)
        return time.perf_counter() - start


def measure(platform: LocalPlatform, jobs: int, on_progress: Callable[[int], None] | None = None) -> RuntimeFigures:
    """Run both phases and return the figures."""
    with platform.api() as api:
        workers = sum(pool.workers for pool in api.pools())  # what the scheduler actually runs
    e2e = run_end_to_end(platform, jobs, on_progress)
    direct = run_backend_alone(jobs, workers)
    return RuntimeFigures(
        jobs=jobs, completed=e2e.completed, workers=workers, e2e_wall_s=e2e.wall_s,
        e2e_jobs_per_s=e2e.completed / e2e.wall_s if e2e.wall_s > 0 else 0.0,
        queue_wait_p50_s=percentile(e2e.queue_waits_s, 50), queue_wait_p95_s=percentile(e2e.queue_waits_s, 95),
        latency_p50_s=percentile(e2e.latencies_s, 50), latency_p95_s=percentile(e2e.latencies_s, 95),
        direct_wall_s=direct, direct_jobs_per_s=jobs / direct if direct > 0 else 0.0)
