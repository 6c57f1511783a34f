"""Compile every kernel a worker may run, before it runs a user's job: one tiny job of each kernel type.

A kernel compiles on its first call in a process (numba JIT, or a load from numba's on-disk cache for the
CPU twins; CUDA kernels compile for the device in use). Inside a user's job that first call costs seconds
of "run" time for milliseconds of work, and every new worker pays it again. ``warm_kernels`` makes those
first calls itself, with the fewest paths and steps each job's validation accepts, so the worker's
first real job finds its kernels compiled. The jobs with Greeks also compile the Greeks' own kernels.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping
from typing import Any, Final

from kernels.descriptors import DESCRIPTORS
from kernels.params import JobType, parse_params


def warm_jobs() -> tuple[tuple[str, JobType, Mapping[str, Any]], ...]:
    """One tiny job per kernel code path, in the order they are compiled: every descriptor's ``warm`` jobs, as
    (name, job type, params). Each name is what ``warm_kernels`` reports; the params are small on purpose: the
    work is the compile, not the paths."""
    return tuple((job.name, job_type, job.params) for job_type, descriptor in DESCRIPTORS.items()
                 for job in descriptor.warm)


WARM_JOBS: Final = warm_jobs()

# The job that readies a thread (``prime_thread``): the cheapest warm-up job with a parallel CPU loop.
PRIMER: Final = next(job for job in WARM_JOBS if job[0] == "european_option")

log = logging.getLogger(__name__)


def warm_kernels(device: str = "auto", job_types: Collection[JobType] | None = None) -> dict[str, float]:
    """Run each of ``WARM_JOBS`` (those of ``job_types`` only, where given) once on ``device``; seconds each
    took (its compile or cache load, mostly).

    A warm-up job that fails is logged and left out: the jobs of its type will fail the same way, each
    with its own error in its result, while every other kernel is warm.
    """
    from kernels.jobs import run_job

    seconds: dict[str, float] = {}
    for name, job_type, params in WARM_JOBS:
        if job_types is not None and job_type not in job_types:
            continue
        started = time.perf_counter()
        try:
            run_job(job_type, parse_params(job_type, params), device=device)
        except Exception:
            log.exception("could not warm %s on device %s", name, device)
            continue
        seconds[name] = time.perf_counter() - started
    return seconds


def prime_thread(device: str = "auto") -> None:
    """Ready the calling thread for kernel jobs by running the smallest warm-up job on it.

    Part of a kernel's first-call cost is per thread, not per process: numba's OpenMP threading layer starts a
    team of threads for each thread that first enters a parallel region, and CUDA binds its context per thread.
    On the 2-core development machine (2026-11-26, OpenMP layer, two threads) a small parallel loop took 2.4 to
    3.2 ms on its first call from a new thread and 0.05 ms after, every time; against the 2.5 to 3 ms a
    1,000,000-path european_option runs warm, that is a doubled first job. ``warm_kernels`` alone leaves it to
    the first job each of a worker's task threads runs.
    """
    from kernels.jobs import run_job

    _, job_type, params = PRIMER
    run_job(job_type, parse_params(job_type, params), device=device)
