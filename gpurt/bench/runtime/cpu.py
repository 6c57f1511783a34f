"""CPU time each part of a local platform spends per job while a benchmark runs.

The local platform's processes (emulator, scheduler, the Dask scheduler's process and the Dask workers
it starts, the benchmark's own client) share the machine's cores. With one worker end to end is bound by the
path's latency; with more, on a machine of few cores, by the CPU a job costs all of them together.
Reading each part's CPU time before and after a phase shows which of the two it was, and where the
cores went.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import pairwise

import psutil

# The processes of one part, looked up when the meter reads them (workers may come and go).
Processes = Callable[[], list[psutil.Process]]


@dataclass(frozen=True)
class CpuShare:
    """One part of the platform and the CPU seconds it spent per job."""

    part: str
    per_job_s: float


def only(*pids: int) -> Processes:
    """The processes ``pids`` alone (their children belong to other parts)."""
    return lambda: [psutil.Process(pid) for pid in pids]


def children_of(pid: int, exclude: Processes | None = None) -> Processes:
    """Every descendant of ``pid``, not ``pid`` itself, less the processes of ``exclude``."""
    def find() -> list[psutil.Process]:
        excluded = {p.pid for p in exclude()} if exclude is not None else set()
        return [p for p in psutil.Process(pid).children(recursive=True) if p.pid not in excluded]
    return find


def child_running(pid: int, module: str) -> Processes:
    """The descendants of ``pid`` that run ``python -m module``."""
    return lambda: [p for p in psutil.Process(pid).children(recursive=True) if _runs_module(p, module)]


def _runs_module(process: psutil.Process, module: str) -> bool:
    try:
        command = process.cmdline()
    except psutil.Error:  # ended meanwhile
        return False
    return any(a == "-m" and b == module for a, b in pairwise(command))


def with_children(pid: int) -> Processes:
    """``pid`` and every descendant of it."""
    return lambda: [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]


class CpuMeter:
    """User + system CPU seconds of named parts between ``start`` and ``stop``."""

    def __init__(self, parts: Mapping[str, Processes]) -> None:
        self._parts = dict(parts)
        self._started: dict[str, dict[int, float]] = {}

    def start(self) -> None:
        """Read every part's CPU time now."""
        self._started = {part: _cpu_by_pid(processes) for part, processes in self._parts.items()}

    def stop(self, jobs: int) -> tuple[CpuShare, ...]:
        """Each part's CPU seconds per job since ``start``, in the order the parts were given.

        A process that started meanwhile counts from zero; one that ended meanwhile is left out, since its
        time can no longer be read.
        """
        shares = []
        for part, processes in self._parts.items():
            before = self._started.get(part, {})
            spent = sum(cpu - before.get(pid, 0.0) for pid, cpu in _cpu_by_pid(processes).items())
            shares.append(CpuShare(part, max(0.0, spent) / max(jobs, 1)))
        return tuple(shares)


def _cpu_by_pid(processes: Processes) -> dict[int, float]:
    by_pid: dict[int, float] = {}
    try:
        found = processes()
    except psutil.Error:  # the part's root process is gone
        return by_pid
    for process in found:
        try:
            times = process.cpu_times()
        except psutil.Error:  # ended between the listing and the read
            continue
        by_pid[process.pid] = times.user + times.system
    return by_pid
