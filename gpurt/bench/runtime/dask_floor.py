"""The floor under the scheduler's CPU per job: what a bare Dask client spends on one task, measured apart.

Every job that runs alone is one Dask task, and the gpu-scheduler's Dask client submits it, follows it to its
end, fetches its result and releases it. This measures that much and nothing else: a client in this process
runs ``FLOOR_TASKS`` tiny tasks one after another on a Dask scheduler and one worker of their own, each in a
process of its own started from Dask's command line (no job, no Pub/Sub, no store), and counts this
process's CPU. The scheduler's CPU per unpacked job cannot go below it as long as each such job is a task
of its own (docs/scheduler.md, "Per-job cost").
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

FLOOR_TASKS: Final = 300
WARM_TASKS: Final = 30  # untimed first: connections, the worker's first task
START_TIMEOUT_S: Final = 60  # for the scheduler and worker to start (and to stop)
_QUIET: Final[dict[str, Any]] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}


@dataclass(frozen=True)
class DaskFloor:
    """A bare Dask client's cost per task (seconds)."""

    tasks: int
    client_cpu_per_task_s: float
    wall_per_task_s: float

    def as_json(self) -> dict[str, Any]:
        """Plain numbers (seconds)."""
        return {"tasks": self.tasks, "client_cpu_per_task_s": self.client_cpu_per_task_s,
                "wall_per_task_s": self.wall_per_task_s}


def measure_dask_floor(tasks: int = FLOOR_TASKS) -> DaskFloor:
    """Submit ``tasks`` tiny tasks one at a time to a Dask scheduler and worker in processes of their own and
    wait for each result; this process's CPU and the wall time per task."""
    from distributed import Client

    with tempfile.TemporaryDirectory(prefix="gpurt-dask-floor-") as folder:
        scheduler_file = str(Path(folder) / "scheduler.json")
        cli = [sys.executable, "-m"]
        processes = [subprocess.Popen([*cli, "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                                       "--no-dashboard", "--scheduler-file", scheduler_file], **_QUIET)]
        try:
            processes.append(subprocess.Popen([*cli, "distributed.cli.dask_worker", "--nthreads", "1", "--no-nanny",
                                               "--no-dashboard", "--scheduler-file", scheduler_file], **_QUIET))
            with Client(scheduler_file=scheduler_file, timeout=START_TIMEOUT_S) as client:
                client.wait_for_workers(1, timeout=START_TIMEOUT_S)
                for value in range(WARM_TASKS):
                    client.submit(abs, -value, pure=False).result()
                cpu_before, wall_before = time.process_time(), time.perf_counter()
                for value in range(tasks):
                    client.submit(abs, -value, pure=False).result()  # a builtin: nothing to import on the worker
                cpu_s, wall_s = time.process_time() - cpu_before, time.perf_counter() - wall_before
        finally:
            for process in reversed(processes):
                process.terminate()
                process.wait(START_TIMEOUT_S)
    return DaskFloor(tasks, cpu_s / tasks, wall_s / tasks)
