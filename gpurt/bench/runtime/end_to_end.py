"""``gpurt bench runtime``: end-to-end noop throughput and queue wait, and the scheduler's own overhead.

End to end, a batch of ``noop`` jobs goes request topic → emulator → scheduler → Dask LocalCluster →
result topic, timed from the first publish to the last result. The same batch is then run straight on a
Dask LocalCluster of the same size in this process, twice: all at once (the "backend alone", Dask's
best case) and one job per worker at a time (what Dask alone gives under the scheduler's flow control,
which admits no more messages than there are slots). The differences per job are what the scheduler
and Pub/Sub add.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from gpurt.bench.runtime.cpu import CpuMeter, CpuShare, Processes, child_running, children_of, only, with_children
from gpurt.bench.runtime.measure import percentile
from gpurt.bench.runtime.profile import SlotProfiler, StageShare, slot_stages
from gpurt.client import Client, JobTimeout, as_completed
from runtime.access.local_state import LocalState
from runtime.local.platform import EMULATOR, LocalPlatform
from runtime.protocol import contract
from runtime.protocol.messages import JobRequest, JobResult, JobStatus

RESULT_TIMEOUT_S: Final = 600.0  # a batch that has not finished by then is reported as incomplete


@dataclass(frozen=True)
class BackendAlone:
    """Wall seconds for the batch on Dask alone: all submitted at once, and one job per worker at a time."""

    batch_wall_s: float
    per_worker_wall_s: float
    per_worker_cpu_per_job_s: float  # CPU of client, Dask scheduler and workers together, one job per worker


@dataclass(frozen=True)
class RuntimeFigures:
    """What one run at one worker count measured (seconds unless named otherwise)."""

    jobs: int
    completed: int
    workers: int
    e2e_wall_s: float
    queue_wait_p50_s: float | None
    queue_wait_p95_s: float | None
    latency_p50_s: float | None
    latency_p95_s: float | None
    direct_wall_s: float  # Dask alone, the batch at once
    per_worker_wall_s: float  # Dask alone, one job per worker at a time
    load_average: float  # 1-minute load average at the end of the run
    stages: tuple[StageShare, ...] = ()  # where a job slot's time went end to end (with a profile)
    cpu: tuple[CpuShare, ...] = ()  # CPU seconds per job of each part of the platform, end to end
    per_worker_cpu_per_job_s: float | None = None  # the same for Dask alone, one job per worker, all parts

    @property
    def cpu_per_job_s(self) -> float:
        """CPU seconds per job of every part of the platform together, end to end."""
        return sum(share.per_job_s for share in self.cpu)

    @property
    def e2e_jobs_per_s(self) -> float:
        """End-to-end throughput (completed jobs)."""
        return _rate(self.completed, self.e2e_wall_s)

    @property
    def direct_jobs_per_s(self) -> float:
        """Dask-alone throughput, the whole batch submitted at once."""
        return _rate(self.jobs, self.direct_wall_s)

    @property
    def per_worker_jobs_per_s(self) -> float:
        """Dask-alone throughput with one job per worker at a time."""
        return _rate(self.jobs, self.per_worker_wall_s)

    @property
    def share_of_direct(self) -> float:
        """End-to-end throughput as a share of Dask alone (1.0 = no overhead)."""
        return self.e2e_jobs_per_s / self.direct_jobs_per_s if self.direct_jobs_per_s else 0.0

    @property
    def overhead_per_job_s(self) -> float:
        """Extra wall time per job the platform adds over Dask alone (the batch at once)."""
        return (self.e2e_wall_s - self.direct_wall_s) / max(self.jobs, 1)

    @property
    def overhead_vs_per_worker_s(self) -> float:
        """Extra wall time per job over Dask alone at the same concurrency (one job per worker at a time)."""
        return (self.e2e_wall_s - self.per_worker_wall_s) / max(self.jobs, 1)

    def as_json(self) -> dict[str, Any]:
        """The figures as plain numbers (rates in jobs/s, times in seconds)."""
        return {
            "workers": self.workers, "jobs": self.jobs, "completed": self.completed,
            "e2e_jobs_per_s": self.e2e_jobs_per_s, "dask_alone_jobs_per_s": self.direct_jobs_per_s,
            "dask_one_per_worker_jobs_per_s": self.per_worker_jobs_per_s,
            "e2e_share_of_dask_alone": self.share_of_direct, "overhead_per_job_s": self.overhead_per_job_s,
            "overhead_vs_one_per_worker_s": self.overhead_vs_per_worker_s,
            "queue_wait_p50_s": self.queue_wait_p50_s, "queue_wait_p95_s": self.queue_wait_p95_s,
            "latency_p50_s": self.latency_p50_s, "latency_p95_s": self.latency_p95_s,
            "e2e_wall_s": self.e2e_wall_s, "dask_alone_wall_s": self.direct_wall_s,
            "dask_one_per_worker_wall_s": self.per_worker_wall_s, "load_average": self.load_average,
            "profile": [{"stage": s.stage, "share": s.share, "per_job_s": s.per_job_s} for s in self.stages],
            "cpu_per_job_s": self.cpu_per_job_s,
            "cpu_per_job": [{"part": c.part, "per_job_s": c.per_job_s} for c in self.cpu],
            "dask_one_per_worker_cpu_per_job_s": self.per_worker_cpu_per_job_s,
        }


@dataclass(frozen=True)
class EndToEnd:
    """The end-to-end phase: wall time from first publish to last result, and per-job timings."""

    wall_s: float
    queue_waits_s: list[float]
    latencies_s: list[float]
    completed: int


def run_end_to_end(platform: LocalPlatform, jobs: int, on_progress: Callable[[int], None] | None = None,
                   params: dict[str, Any] | None = None) -> EndToEnd:
    """Publish ``jobs`` noop requests (with ``params``, e.g. ``sleep_s``) at once and collect their results."""
    run = uuid.uuid4().hex[:8]
    requests = [JobRequest.model_validate({"job_id": f"bench-{run}-{i}", "type": "noop", "params": params or {}})
                for i in range(jobs)]
    arrived: dict[str, float] = {}
    results: list[JobResult] = []
    # Through the Python API's Client: its map publishes the batch at once, as a user's would.
    with Client(target=platform.target()) as client:
        start = time.perf_counter()
        with contextlib.suppress(JobTimeout):  # a batch not finished by then is reported as incomplete
            for future in as_completed(client.map(requests), RESULT_TIMEOUT_S, progress=False):
                arrived[future.job_id] = time.perf_counter()
                results.append(future.outcome().raw)
                if on_progress:
                    on_progress(len(arrived))
    done = [r for r in results if r.status is JobStatus.SUCCEEDED]
    wall = (max(arrived.values()) - start) if arrived else float("nan")
    waits = [r.metrics.queue_wait_s for r in done if r.metrics.queue_wait_s is not None]
    latencies = [arrived[r.job_id] - start for r in done]
    return EndToEnd(wall, waits, latencies, len(done))


def run_backend_alone(jobs: int, workers: int) -> BackendAlone:
    """Time ``jobs`` noop jobs on a LocalCluster of ``workers`` workers: all at once, then one per worker.

    The batch goes through Dask's own client, as a user of Dask alone would send it; one job per worker
    at a time goes through the scheduler's client (``PromptClient``), so that figure is the ceiling the
    scheduler itself could reach under its flow control.
    """
    from distributed import Client, LocalCluster

    from kernels.jobs import run_job
    from kernels.params import JobType, NoopParams
    from runtime.scheduler.backends.dask_client import PromptClient

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        with Client(cluster) as client:
            noop = NoopParams()
            client.gather(client.map(run_job, [JobType.NOOP] * workers, [noop] * workers, pure=False))  # warm up
            start = time.perf_counter()
            client.gather(client.map(run_job, [JobType.NOOP] * jobs, [noop] * jobs, pure=False))
            batch = time.perf_counter() - start
        with PromptClient(cluster) as client:
            worker_pids = list(client.run(os.getpid).values())
            # The client and the Dask scheduler run in this process, each worker in its own; this process's
            # other children are the platform's, idle meanwhile.
            meter = CpuMeter({"Dask alone": only(os.getpid(), *worker_pids)})
            meter.start()
            wall = _one_job_per_worker(client, jobs, workers)
            (cpu,) = meter.stop(jobs)
            return BackendAlone(batch, wall, cpu.per_job_s)


def _one_job_per_worker(client: Any, jobs: int, workers: int) -> float:
    """Wall seconds for ``jobs`` noop jobs, one thread per worker submitting one and waiting for it."""
    from kernels.jobs import run_job
    from kernels.params import JobType, NoopParams

    def one_at_a_time(count: int) -> None:
        for _ in range(count):
            client.submit(run_job, JobType.NOOP, NoopParams(), pure=False).result()

    shares = [jobs // workers + (1 if i < jobs % workers else 0) for i in range(workers)]
    threads = [threading.Thread(target=one_at_a_time, args=(n,), name=f"bench-slot-{i}")
               for i, n in enumerate(shares)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start


def measure(platform: LocalPlatform, jobs: int, on_progress: Callable[[int], None] | None = None,
            profile_to: Path | None = None) -> RuntimeFigures:
    """Run the end-to-end phase on ``platform``, then Dask alone at the same size; return the figures.

    With ``profile_to`` (a file), the scheduler is sampled during the end-to-end phase and the figures
    say where its job slots' time went.
    """
    with platform.api() as api:
        workers = sum(pool.workers for pool in api.pools())  # what the scheduler actually runs
    state = platform.running_state()
    meter = CpuMeter(platform_parts(state))
    profiler = None
    if profile_to is not None:
        profiler = SlotProfiler(state.schedulers()[0].pid, profile_to)
        profiler.start()
    meter.start()
    try:
        e2e = run_end_to_end(platform, jobs, on_progress)
    finally:
        cpu = meter.stop(jobs)
        raw = profiler.stop() if profiler is not None else ""
    # Locally there is one slot per worker: slot time per job is workers * wall / jobs.
    stages = tuple(slot_stages(raw, workers * e2e.wall_s / max(e2e.completed, 1))) if raw else ()
    alone = run_backend_alone(jobs, workers)
    return RuntimeFigures(
        jobs=jobs, completed=e2e.completed, workers=workers, e2e_wall_s=e2e.wall_s,
        queue_wait_p50_s=percentile(e2e.queue_waits_s, 50), queue_wait_p95_s=percentile(e2e.queue_waits_s, 95),
        latency_p50_s=percentile(e2e.latencies_s, 50), latency_p95_s=percentile(e2e.latencies_s, 95),
        direct_wall_s=alone.batch_wall_s, per_worker_wall_s=alone.per_worker_wall_s,
        load_average=os.getloadavg()[0], stages=stages, cpu=cpu,
        per_worker_cpu_per_job_s=alone.per_worker_cpu_per_job_s)


def platform_parts(state: LocalState) -> dict[str, Processes]:
    """The parts of a running local platform whose CPU the benchmark reads, by what they do for a job."""

    scheduler = state.schedulers()[0].pid
    emulator = state.process(EMULATOR)
    dask_scheduler = child_running(scheduler, contract.DASK_SCHEDULER_MODULE)
    parts = {
        "scheduler": only(scheduler),
        "Dask scheduler (the scheduler's child process)": dask_scheduler,
        "Dask workers": children_of(scheduler, exclude=dask_scheduler),
    }
    if emulator is not None:
        parts["Pub/Sub emulator"] = with_children(emulator.pid)
    parts["benchmark client (publish, collect results)"] = only(os.getpid())
    return parts


def _rate(count: int, wall_s: float) -> float:
    return count / wall_s if wall_s > 0 else 0.0
