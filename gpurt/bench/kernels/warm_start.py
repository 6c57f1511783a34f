"""A fresh worker's first job, with and without the warm-up a Dask worker runs before it takes jobs.

Each measurement runs in a process of its own, as a new worker is: ``warmed`` compiles (or loads from
numba's cache) every kernel the way a worker's preload does (``kernels.warm.warm_kernels``), readies its
task thread (``prime_thread``), then times its first job on that thread; ``cold`` times the first job with
no warm-up at all. Both then time the same job warm. The warm-up's own seconds are what a new worker pays
before it takes jobs (docs/scheduler.md, "Warm workers"). Both find numba's disk cache as the run does: the
worker image fills it at build. ``empty_cache`` (opt-in: it compiles every kernel, a minute of CPU on two
cores) adds a warmed process whose numba cache starts empty, as a worker's would without the image's cache.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from kernels.params import JobType, parse_params

# The job a user's first request runs: a European option of a million paths (a few ms warm on either device).
FIRST_JOB: Final[dict[str, Any]] = {"paths": 1_000_000, "seed": 1}
WARM_REPEATS: Final = 5
CHILD_TIMEOUT_S: Final = 600.0  # a cold numba cache compiles every kernel: minutes on a small CPU
MODES: Final = ("warmed", "cold")


@dataclass(frozen=True)
class WarmStart:
    """A fresh process's first job, warmed and cold, against the same job warm (seconds)."""

    device: str
    warm_up_s: float  # the warm-up a warmed worker runs before its first job
    warmed_first_s: float  # the first job's run time after it
    cold_first_s: float  # the first job's run time in a process without warm-up
    warm_s: float  # the same job warm (median of WARM_REPEATS, in the warmed process)
    empty_cache_warm_up_s: float | None = None  # the warm-up of a warmed process whose numba cache starts empty
    empty_cache_first_s: float | None = None  # and its first job's run time

    @property
    def warmed_ratio(self) -> float:
        """The warmed worker's first job against the job warm."""
        return self.warmed_first_s / self.warm_s

    @property
    def cold_ratio(self) -> float:
        """The first job without warm-up against the job warm."""
        return self.cold_first_s / self.warm_s

    def as_json(self) -> dict[str, Any]:
        """Plain values, with the two ratios."""
        return {**asdict(self), "warmed_ratio": self.warmed_ratio, "cold_ratio": self.cold_ratio}

    def rows(self) -> list[tuple[str, str, str, str]]:
        """The table, terminal and BENCHMARKS.md alike: what ran, the warm-up, the first job, against warm."""
        empty = []
        if self.empty_cache_warm_up_s is not None and self.empty_cache_first_s is not None:
            empty = [("warmed worker, empty numba cache", f"{self.empty_cache_warm_up_s:.2f} s",
                      f"{self.empty_cache_first_s * 1000:.2f} ms", f"{self.empty_cache_first_s / self.warm_s:.1f}x")]
        return [("warmed worker", f"{self.warm_up_s:.2f} s", f"{self.warmed_first_s * 1000:.2f} ms",
                 f"{self.warmed_ratio:.1f}x"),
                *empty,
                ("no warm-up", "—", f"{self.cold_first_s * 1000:.2f} ms", f"{self.cold_ratio:.1f}x"),
                ("warm", "", f"{self.warm_s * 1000:.2f} ms", "1.0x")]


def measure(device: str, empty_cache: bool = False) -> WarmStart:
    """Run the warmed and the cold process on ``device``, one after the other; with ``empty_cache``, then a
    warmed process whose numba cache starts empty."""
    warmed, cold = (_child(mode, device) for mode in MODES)
    empty: dict[str, float] = {}
    if empty_cache:
        with tempfile.TemporaryDirectory(prefix="gpurt-empty-numba-cache-") as folder:
            empty = warm_up_in(Path(folder), device)  # every job type, as a worker's warm-up
    return WarmStart(device, warmed["warm_up_s"], warmed["first_s"], cold["first_s"], warmed["warm_s"],
                     empty.get("warm_up_s"), empty.get("first_s"))


def warm_up_in(cache: Path, device: str, job_types: Sequence[str] | None = None) -> dict[str, float]:
    """A warmed process's figures with ``cache`` as its numba cache (``job_types``: what it warms; None for
    every job type): an empty folder times the compile a worker without the image's cache pays."""
    return _child("warmed", device, job_types, {"NUMBA_CACHE_DIR": str(cache)})


def _child(mode: str, device: str, job_types: Sequence[str] | None = None,
           env: dict[str, str] | None = None) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-m", __name__, mode, device, *(job_types or ())], capture_output=True,
                          text=True, timeout=CHILD_TIMEOUT_S, check=False, env={**os.environ, **(env or {})})
    if done.returncode != 0:
        raise RuntimeError(f"the {mode} process failed: {done.stderr.strip()[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _timed_job(device: str) -> float:
    from kernels.jobs import run_job

    params = parse_params(JobType.EUROPEAN_OPTION, FIRST_JOB)
    started = time.perf_counter()
    run_job(JobType.EUROPEAN_OPTION, params, device=device)
    return time.perf_counter() - started


def run_child(mode: str, device: str, job_types: Sequence[str] | None = None) -> dict[str, float]:
    """In this (fresh) process: the optional warm-up on this thread (of ``job_types``, None for every one),
    then the first job and the warm ones on a task thread of its own, as a worker runs them."""
    from kernels.warm import prime_thread, warm_kernels

    warm_up_s = 0.0
    if mode == "warmed":
        started = time.perf_counter()
        warm_kernels(device, None if job_types is None else [JobType(name) for name in job_types])
        warm_up_s = time.perf_counter() - started
    figures: dict[str, float] = {"warm_up_s": warm_up_s}

    def task_thread() -> None:
        if mode == "warmed":
            prime_thread(device)  # a worker readies its task threads before they take jobs
        figures["first_s"] = _timed_job(device)
        figures["warm_s"] = statistics.median(_timed_job(device) for _ in range(WARM_REPEATS))
    thread = threading.Thread(target=task_thread, name="task-thread")
    thread.start()
    thread.join()
    return figures


def markdown(f: WarmStart, where: str, date: str) -> str:
    """The ``kernels-warm-start-<device>`` section of BENCHMARKS.md."""
    paths = f"{FIRST_JOB['paths']:,}"
    return "\n".join([
        f"## A fresh worker's first job on {f.device.upper()} — {date}",
        "",
        f"Device: {where}. A {paths}-path `european_option` as the first job of a fresh process, timed on a task "
        "thread as a worker runs it: after the warm-up a worker runs before it takes jobs (every kernel "
        "compiled or loaded from numba's cache, the task thread readied), and with no warm-up; against the same "
        f"job warm (median of {WARM_REPEATS}). numba's disk cache as the run found it (docs/scheduler.md, "
        "\"Warm workers\"); the empty-cache row, where measured, warms in a process whose numba cache starts "
        "empty, as a worker's would without the one the image fills at build.",
        "",
        "| | warm-up before the first job | first job's run time | against warm |",
        "| --- | ---: | ---: | ---: |",
        *(f"| {' | '.join(row)} |" for row in f.rows()),
    ])


if __name__ == "__main__":
    print(json.dumps(run_child(sys.argv[1], sys.argv[2], sys.argv[3:] or None)))
