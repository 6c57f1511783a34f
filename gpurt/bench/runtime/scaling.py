"""``gpurt bench scaling``: one large job sharded over 1, 2, ... N Dask workers, speed-up against 1 worker.

Each worker count gets its own cluster of single-thread workers (``NUMBA_NUM_THREADS=1``: a worker is one
CPU core), or of one-GPU workers (``CUDA_VISIBLE_DEVICES`` one device each, ``GPU: 1``) where GPUs
exist, and runs each job through the scheduler's own ``DaskBackend`` with one shard per worker. A first,
untimed round loads the kernels and Dask's per-worker machinery everywhere; each figure is the fastest of
``repeats`` runs (the one least disturbed by other work on a shared machine), and the worker counts take
turns within each repeat so that they all see the same load. Speed-up is the 1-worker time over the
N-worker time in the same run; parallel efficiency is speed-up / N.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from kernels.params import EuropeanOptionParams, JobType, PortfolioVarParams
from runtime.protocol.messages import JobRequest

# Work per job on one CPU core, about 4 s and 2 s there (GPUs take the same jobs, many times over: their
# launches are far shorter, so GPU runs use ``GPU_SCALE`` times more of each).
EUROPEAN_PATHS: Final = 2_000_000_000  # the params' maximum
VAR_SCENARIOS: Final = 16_000_000
VAR_ASSETS: Final = 10
GPU_REPEAT_JOBS: Final = 20  # a GPU job of the maximum paths is milliseconds: time this many back to back
EFFICIENCY_GOAL: Final = 0.85  # at 2 workers
JOB_TIMEOUT_S: Final = 600.0


@dataclass(frozen=True)
class ScalingRow:
    """One job at one worker count: fastest wall time, and speed-up / efficiency against 1 worker."""

    job: str
    workers: int
    seconds: float
    speed_up: float
    efficiency: float
    shards: int
    estimate: float


@dataclass
class ScalingRun:
    """Every row of one ``gpurt bench scaling`` run, and where it ran."""

    device: str
    rows: list[ScalingRow] = field(default_factory=list)

    def efficiency_at(self, job: str, workers: int) -> float | None:
        """Parallel efficiency of ``job`` at ``workers`` workers, None if not measured."""
        return next((r.efficiency for r in self.rows if r.job == job and r.workers == workers), None)


def jobs(scale: float) -> list[JobRequest]:
    """The two benchmarked jobs: a european call and a 10-asset full-revaluation VaR, at ``scale``."""
    n = VAR_ASSETS
    var = PortfolioVarParams(
        exposures=[1e6 * (1 + i) * (-1) ** i for i in range(n)], volatilities=[0.1 + 0.02 * i for i in range(n)],
        correlation=[[1.0 if i == j else 0.3 for j in range(n)] for i in range(n)],
        paths=max(10_000, int(VAR_SCENARIOS * scale)), revaluation="full", seed=7)
    european = EuropeanOptionParams(paths=max(10_000, min(EUROPEAN_PATHS, int(EUROPEAN_PATHS * scale))), seed=7)
    return [JobRequest(job_id=f"scaling-{kind.value}", type=kind, params=params, timeout_s=JOB_TIMEOUT_S)
            for kind, params in ((JobType.EUROPEAN_OPTION, european), (JobType.PORTFOLIO_VAR, var))]


@contextmanager
def cluster(workers: int, gpus: int) -> Iterator[Any]:
    """A Dask client on ``workers`` single-thread worker processes, one GPU each when ``gpus``."""
    from distributed import Client, Nanny, Scheduler, SpecCluster

    def spec(i: int) -> dict[str, Any]:
        env = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        options: dict[str, Any] = {"nthreads": 1, "env": env, "host": "127.0.0.1", "silence_logs": logging.ERROR}
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = str(i % gpus)
            options["resources"] = {"GPU": 1}
        return {"cls": Nanny, "options": options}

    scheduler = {"cls": Scheduler, "options": {"dashboard": False, "dashboard_address": "127.0.0.1:0",
                                                "host": "127.0.0.1"}}
    specs = {i: spec(i) for i in range(workers)}
    with SpecCluster(workers=specs, scheduler=scheduler, silence_logs=logging.ERROR) as spec_cluster, \
            Client(spec_cluster) as client:
        client.wait_for_workers(workers, timeout=120)
        yield client


def measure(max_workers: int, device: str, gpus: int, repeats: int, scale: float,
            on_step: Callable[[str], None] = lambda _: None) -> ScalingRun:
    """Time every job on 1 .. ``max_workers`` workers; ``on_step`` hears what is being timed."""
    from runtime.scheduler.backends.dask import DaskBackend

    requests = jobs(scale)
    best: dict[tuple[str, int], tuple[float, Any]] = {}
    with _clusters(list(range(1, max_workers + 1)), gpus) as clients:
        # A backend per worker count and job (the job's shard size), each closed at the end: its span pruner is a
        # thread that would otherwise poll a closed cluster, and log that it cannot, as long as the process lives.
        backends = {(workers, index): DaskBackend(
            client, device=device, shard_paths=-(-request.params.paths // workers))  # type: ignore[union-attr]
            for workers, client in clients.items() for index, request in enumerate(requests)}
        try:
            # round 0 is not timed: it loads the kernels and the Dask machinery (worker clients, topics) everywhere
            for repeat in range(repeats + 1):
                for (workers, index), backend in backends.items():
                    request = requests[index]
                    on_step(f"{request.type.value} on {workers} worker(s), " +
                            (f"run {repeat} of {repeats}" if repeat else "warming up"))
                    runs = GPU_REPEAT_JOBS if gpus else 1
                    began = time.perf_counter()
                    for attempt in range(runs):
                        out = backend.run(request, attempt=attempt + 1)
                    seconds = (time.perf_counter() - began) / runs
                    key = (request.type.value, workers)
                    if repeat and (key not in best or seconds < best[key][0]):
                        best[key] = (seconds, out)
        finally:
            for backend in backends.values():
                backend.close(client=False)  # the clients close with their clusters
    result = ScalingRun(device=device)
    for (job, workers), (seconds, out) in sorted(best.items()):
        speed_up = best[(job, 1)][0] / seconds
        result.rows.append(ScalingRow(job, workers, seconds, speed_up, speed_up / workers,
                                      int(out.summary.get("shards", 1)), float(out.summary["estimate"])))
    return result


@contextmanager
def _clusters(worker_counts: list[int], gpus: int) -> Iterator[dict[int, Any]]:
    """One running cluster per worker count, all up at once so the counts can take turns."""
    from contextlib import ExitStack

    with ExitStack() as stack:
        yield {n: stack.enter_context(cluster(n, gpus)) for n in worker_counts}
