"""``gpurt bench utilization``: how much of its time a worker slot spends running jobs.

A ``noop`` job that sleeps ``sleep_s`` uses no CPU while it runs, like a GPU kernel seen from the host.
Publish N of them at once to a local platform of W workers: slot utilization = N x sleep_s / (W x
makespan), the makespan from the first publish to the last result; what is missing is the time a slot
spent between jobs (the scheduler, Pub/Sub, Dask, the store). A steady stream at a share of capacity
(``STREAM_LOAD`` x W / sleep_s jobs per second) gives the queue wait a user sees when the platform is
busy but not overloaded. The scheduler process's own CPU per job is read over each burst, and apart from
it that of the Dask scheduler's process, which the scheduler starts as its child where it runs one locally
(docs/scheduler.md, "Per-job cost").
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gpurt.bench.runtime.cpu import CpuMeter, child_running, only
from gpurt.bench.runtime.dask_floor import DaskFloor
from gpurt.bench.runtime.end_to_end import RESULT_TIMEOUT_S, run_end_to_end
from gpurt.bench.runtime.goals import Goal
from gpurt.bench.runtime.measure import fmt_duration, percentile
from gpurt.client import Client, JobFuture, wait
from runtime.local.platform import LocalPlatform
from runtime.protocol import contract
from runtime.protocol.messages import JobRequest

# The grid of the goals: worker counts and job durations (seconds).
GRID_WORKERS: Final = (1, 4)
GRID_SLEEPS_S: Final = (0.010, 0.050, 0.200)
# Least slot utilization per (workers, job duration); cells not named here are measured, not judged.
UTILIZATION_GOALS: Final = {(4, 0.200): 0.95, (4, 0.050): 0.85, (1, 0.010): 0.70}
# Most CPU the scheduler process may spend per job (seconds).
MAX_SCHEDULER_CPU_PER_JOB_S: Final = 0.003
# The steady stream runs at this share of capacity, and its p95 queue wait should stay within this many
# job durations.
STREAM_LOAD: Final = 0.8
MAX_QUEUE_WAIT_JOBS: Final = 2.0
# Job duration of the steady stream (seconds).
STREAM_SLEEP_S: Final = 0.050
# The first job on a fresh platform: a small european_option (its kernel's work is milliseconds), timed
# against the same job once the platform is warm; its run time should stay within this factor.
# A million paths: milliseconds of kernel work, enough that a compile on first use (seconds) would show and
# that the timer's and the first call's fixed fraction of a millisecond does not decide the ratio.
FIRST_JOB_PARAMS: Final = {"paths": 1_000_000}
MAX_FIRST_JOB_SLOWDOWN: Final = 2.0
WARM_REPEATS: Final = 3  # warm runs of that job; the median counts


@dataclass(frozen=True)
class Burst:
    """N jobs of ``sleep_s`` published at once to W workers."""

    workers: int
    sleep_s: float
    jobs: int
    completed: int
    makespan_s: float
    scheduler_cpu_per_job_s: float
    dask_scheduler_cpu_per_job_s: float | None = None  # the Dask scheduler's process; None: not measured
    # The scheduler's CPU per job by kind of thread (``runtime.scheduler.thread_cpu.thread_group``), busiest first.
    threads: tuple[tuple[str, float], ...] = ()

    @property
    def utilization(self) -> float:
        """Share of the workers' time spent running jobs, first publish to last result."""
        if not self.makespan_s > 0:
            return 0.0
        return self.completed * self.sleep_s / (self.workers * self.makespan_s)

    def as_json(self) -> dict[str, Any]:
        """Plain numbers (seconds, shares)."""
        return {"workers": self.workers, "sleep_s": self.sleep_s, "jobs": self.jobs, "completed": self.completed,
                "makespan_s": self.makespan_s, "utilization": self.utilization,
                "jobs_per_s": self.completed / self.makespan_s if self.makespan_s > 0 else 0.0,
                "scheduler_cpu_per_job_s": self.scheduler_cpu_per_job_s,
                "dask_scheduler_cpu_per_job_s": self.dask_scheduler_cpu_per_job_s,
                "scheduler_threads_cpu_per_job_s": dict(self.threads)}


@dataclass(frozen=True)
class Stream:
    """Jobs of ``sleep_s`` published at ``rate_per_s``: the queue wait they saw."""

    workers: int
    sleep_s: float
    rate_per_s: float
    jobs: int
    completed: int
    queue_wait_p50_s: float | None
    queue_wait_p95_s: float | None

    def as_json(self) -> dict[str, Any]:
        """Plain numbers (seconds, jobs/s)."""
        return {"workers": self.workers, "sleep_s": self.sleep_s, "rate_per_s": self.rate_per_s, "jobs": self.jobs,
                "completed": self.completed, "queue_wait_p50_s": self.queue_wait_p50_s,
                "queue_wait_p95_s": self.queue_wait_p95_s}


@dataclass(frozen=True)
class FirstJob:
    """A fresh platform's first ``european_option`` job against the same job warm (seconds)."""

    workers: int
    cold_to_first_result_s: float  # from asking for the platform (nothing started) to the job's result
    first_run_s: float  # the first job's own run time on its worker
    warm_run_s: float  # the same job's run time once warm (median of WARM_REPEATS)

    def as_json(self) -> dict[str, Any]:
        """Plain numbers (seconds)."""
        return {"workers": self.workers, "cold_to_first_result_s": self.cold_to_first_result_s,
                "first_run_s": self.first_run_s, "warm_run_s": self.warm_run_s}


@dataclass(frozen=True)
class UtilizationFigures:
    """Everything one ``gpurt bench utilization`` run measured."""

    bursts: tuple[Burst, ...]
    streams: tuple[Stream, ...]
    load_average: float  # 1-minute load average at the end of the run
    first_jobs: tuple[FirstJob, ...] = ()
    dask_floor: DaskFloor | None = None  # a bare Dask client's cost per task, measured apart

    def as_json(self) -> dict[str, Any]:
        """Plain values."""
        return {"bursts": [b.as_json() for b in self.bursts], "streams": [s.as_json() for s in self.streams],
                "first_jobs": [f.as_json() for f in self.first_jobs], "load_average": self.load_average,
                "dask_floor": self.dask_floor.as_json() if self.dask_floor else None}


def run_burst(platform: LocalPlatform, workers: int, sleep_s: float, jobs: int,
              on_progress: Callable[[int], None] | None = None) -> Burst:
    """Publish ``jobs`` noop jobs of ``sleep_s`` at once; time them and read the scheduler's CPU meanwhile."""

    scheduler = platform.running_state().schedulers()[0].pid
    meter = CpuMeter({"scheduler": only(scheduler),
                      "Dask scheduler": child_running(scheduler, contract.DASK_SCHEDULER_MODULE)})
    threads_before = _thread_cpu(platform)
    meter.start()
    e2e = run_end_to_end(platform, jobs, on_progress, params={"sleep_s": sleep_s})
    completed = max(e2e.completed, 1)
    cpu, dask_cpu = meter.stop(completed)
    threads = _per_job(threads_before, _thread_cpu(platform), cpu.per_job_s * completed, completed)
    return Burst(workers, sleep_s, jobs, e2e.completed, e2e.wall_s, cpu.per_job_s, dask_cpu.per_job_s, threads)


def _thread_cpu(platform: LocalPlatform) -> dict[int, tuple[str, float]]:
    """Each live scheduler thread's kind and CPU seconds so far, by thread id (its ``GET /status/threads``)."""
    from runtime.scheduler.thread_cpu import thread_group

    with platform.api() as api:
        return {int(t["native_id"]): (thread_group(str(t["name"])), float(t["cpu_s"])) for t in api.threads()}


# The row of CPU spent by threads that ended during a burst (a replaced stream's slots): the process's CPU
# less what the live threads account for.
ENDED_THREADS: Final = "(threads that ended meanwhile)"


def _per_job(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], process_cpu_s: float,
             jobs: int) -> tuple[tuple[str, float], ...]:
    """CPU seconds per job of each kind of thread between two readings, busiest first, idle ones left out. A
    thread that started meanwhile counts whole; those that ended meanwhile are one row, out of
    ``process_cpu_s``, the process's CPU over the same time."""
    spent: dict[str, float] = {}
    for tid, (group, cpu_s) in after.items():
        spent[group] = spent.get(group, 0.0) + cpu_s - before.get(tid, (group, 0.0))[1]
    spent[ENDED_THREADS] = process_cpu_s - sum(spent.values())
    per_job = ((group, cpu_s / jobs) for group, cpu_s in spent.items())
    return tuple(sorted(((g, s) for g, s in per_job if s > 0), key=lambda item: (-item[1], item[0])))


def run_stream(platform: LocalPlatform, workers: int, sleep_s: float, jobs: int, load: float = STREAM_LOAD,
               on_progress: Callable[[int], None] | None = None) -> Stream:
    """Publish ``jobs`` noop jobs of ``sleep_s`` evenly at ``load`` x capacity; collect their queue waits."""
    rate = load * workers / sleep_s
    run = uuid.uuid4().hex[:8]
    job_ids = [f"stream-{run}-{i}" for i in range(jobs)]
    arrived = 0

    lock = threading.Lock()

    def on_result(_: JobFuture) -> None:  # on the client's subscriber threads
        nonlocal arrived
        with lock:
            arrived += 1
            if on_progress:
                on_progress(arrived)

    with Client(target=platform.target()) as client:
        start = time.perf_counter()
        futures = []
        for i, job_id in enumerate(job_ids):
            # Pacing to the stream's rate, not waiting for an outcome.
            time.sleep(max(0.0, start + i / rate - time.perf_counter()))
            future = client.submit(JobRequest.model_validate(
                {"job_id": job_id, "type": "noop", "params": {"sleep_s": sleep_s}}))
            future.add_done_callback(on_result)
            futures.append(future)
        done, _ = wait(futures, RESULT_TIMEOUT_S)
    results = [future.outcome().raw for future in done]
    waits = [r.metrics.queue_wait_s for r in results if r.metrics.queue_wait_s is not None]
    return Stream(workers, sleep_s, rate, jobs, len(results), percentile(waits, 50), percentile(waits, 95))


def run_first_job(platform: LocalPlatform, workers: int, asked_at: float) -> FirstJob:
    """The first ``european_option`` job on ``platform`` (asked for at ``asked_at``, ``perf_counter``), then warm."""
    first, arrived = _one_european(platform)
    warm = sorted(_one_european(platform)[0] for _ in range(WARM_REPEATS))
    return FirstJob(workers, arrived - asked_at, first, warm[len(warm) // 2])


def _one_european(platform: LocalPlatform) -> tuple[float, float]:
    """Run one small european_option end to end; its run time and when its result arrived (``perf_counter``)."""
    # cache: false, or every warm repeat would be answered from the result cache and time no run at all.
    request = JobRequest.model_validate({"job_id": f"first-{uuid.uuid4().hex[:8]}", "type": "european_option",
                                         "params": FIRST_JOB_PARAMS, "cache": False})
    with Client(target=platform.target()) as client:
        future = client.submit(request)
        done, _ = wait([future], RESULT_TIMEOUT_S)
        arrived = time.perf_counter()
    result = future.outcome().raw if done else None
    if result is None or result.metrics.run_s is None:
        raise RuntimeError(f"the benchmark's european_option job {request.job_id} did not succeed: {result}")
    return result.metrics.run_s, arrived


def judge(figures: UtilizationFigures) -> list[Goal]:
    """The utilization goals of the grid cells measured, the scheduler's CPU per job, the stream's queue wait."""
    goals: list[Goal] = []
    for burst in figures.bursts:
        least = UTILIZATION_GOALS.get((burst.workers, round(burst.sleep_s, 3)))
        if least is not None:
            goals.append(Goal(f"slot utilization, {_cell(burst.workers, burst.sleep_s)}", f">= {least:.0%}",
                              f"{burst.utilization:.0%}", burst.utilization >= least))
    if figures.bursts:
        worst = max(figures.bursts, key=lambda b: b.scheduler_cpu_per_job_s)
        floor = figures.dask_floor
        beside = f"; a bare Dask client: {fmt_duration(floor.client_cpu_per_task_s)} per task" if floor else ""
        goals.append(Goal("scheduler CPU per job (worst cell)", f"<= {fmt_duration(MAX_SCHEDULER_CPU_PER_JOB_S)}",
                          f"{fmt_duration(worst.scheduler_cpu_per_job_s)} ({_cell(worst.workers, worst.sleep_s)}"
                          f"{beside})", worst.scheduler_cpu_per_job_s <= MAX_SCHEDULER_CPU_PER_JOB_S))
    for stream in figures.streams:
        limit = MAX_QUEUE_WAIT_JOBS * stream.sleep_s
        p95 = stream.queue_wait_p95_s
        goals.append(Goal(f"p95 queue wait at {STREAM_LOAD:.0%} load, {_cell(stream.workers, stream.sleep_s)}",
                          f"<= {fmt_duration(limit)}", fmt_duration(p95), p95 is not None and p95 <= limit))
    for first in figures.first_jobs:
        workers = f"{first.workers} worker{'s' if first.workers != 1 else ''}"
        goals.append(Goal(f"first european_option run time on a fresh platform, {workers}",
                          f"<= {MAX_FIRST_JOB_SLOWDOWN:g} x warm ({fmt_duration(first.warm_run_s)})",
                          fmt_duration(first.first_run_s),
                          first.first_run_s <= MAX_FIRST_JOB_SLOWDOWN * first.warm_run_s))
    return goals


def measure(platform: LocalPlatform, workers: int, jobs: int, sleeps_s: Sequence[float],
            stream_jobs: int, stream_sleep_s: float = STREAM_SLEEP_S,
            on_progress: Callable[[str, int, int], None] | None = None,
            asked_at: float | None = None) -> UtilizationFigures:
    """The first job (with ``asked_at``, when the platform was asked for), every burst of ``sleeps_s``, then the
    steady stream, on one fresh platform of ``workers`` workers.

    Two noop jobs per worker run untimed before the bursts: slot utilization is measured on a platform
    that has served jobs; the first job's figures are the cold start.
    """
    first_jobs = (run_first_job(platform, workers, asked_at),) if asked_at is not None else ()
    run_end_to_end(platform, 2 * workers)
    bursts = []
    for sleep_s in sleeps_s:
        what = f"{jobs} jobs of {fmt_duration(sleep_s)} at once, {workers} worker(s)"
        bursts.append(run_burst(platform, workers, sleep_s, jobs, _report(on_progress, what, jobs)))
    streams = []
    if stream_jobs:
        what = f"{stream_jobs} jobs of {fmt_duration(stream_sleep_s)} at {STREAM_LOAD:.0%} load, {workers} worker(s)"
        streams.append(run_stream(platform, workers, stream_sleep_s, stream_jobs,
                                  on_progress=_report(on_progress, what, stream_jobs)))
    return UtilizationFigures(tuple(bursts), tuple(streams), os.getloadavg()[0], first_jobs)


def merge(runs: Sequence[UtilizationFigures]) -> UtilizationFigures:
    """One set of figures from the runs of several worker counts; the load average is the highest seen."""
    return UtilizationFigures(tuple(b for r in runs for b in r.bursts), tuple(s for r in runs for s in r.streams),
                              max((r.load_average for r in runs), default=os.getloadavg()[0]),
                              tuple(f for r in runs for f in r.first_jobs))


def _cell(workers: int, sleep_s: float) -> str:
    return f"{workers} worker{'s' if workers != 1 else ''}, {fmt_duration(sleep_s)} jobs"


def _report(on_progress: Callable[[str, int, int], None] | None, what: str,
            total: int) -> Callable[[int], None] | None:
    if on_progress is None:
        return None
    on_progress(what, 0, total)
    return lambda done: on_progress(what, done, total)
