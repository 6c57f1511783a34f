"""Writes benchmark figures into BENCHMARKS.md, one marked section per benchmark."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "BENCHMARKS.md"  # the repository root
_HEADER = "# Benchmarks\n\nFigures written by `gpurt bench … --write`; each section names its device and date.\n"


def write_section(name: str, markdown: str, path: Path = DEFAULT_PATH) -> None:
    """Replace (or append) the section ``name`` of ``path`` with ``markdown``.

    Sections are delimited by ``<!-- bench:NAME -->`` / ``<!-- /bench:NAME -->`` so each benchmark owns
    its own block and reruns replace old figures instead of piling up.
    """
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{begin}\n{markdown.strip()}\n{end}"
    text = path.read_text() if path.exists() else _HEADER
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


# A CPU benchmark starts with ``--write`` only below this one-minute load average per core: on a shared
# machine the parallel CPU twins lose more to other work than the single-threaded baseline does, and the
# same case measured 18.4 s at load 2.8 and 42.4 s at load 2.5 on 2 cores.
MAX_WRITE_LOAD_PER_CORE: Final = 0.5
# ... and its figures are written only if other processes used at most this much CPU during the run (cores'
# worth, per core). The load average after the run cannot judge that: a benchmark that fills every core
# raises it by itself (the CPU STAC case took 2 cores from load 0.66 to 1.95 on its own).
MAX_OTHERS_CPU_PER_CORE: Final = 0.15


@dataclass(frozen=True)
class CpuClock:
    """CPU seconds spent so far by the whole machine (``None`` without ``/proc/stat``) and by this process."""

    at: float  # time.monotonic()
    machine_busy_s: float | None
    own_s: float  # this process and its reaped children


def cpu_clock() -> CpuClock:
    """Read the clocks now."""
    own = os.times()
    return CpuClock(time.monotonic(), _machine_busy_s(),
                    own.user + own.system + own.children_user + own.children_system)


def _machine_busy_s() -> float | None:
    try:
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal ...: everything but idle and iowait is busy; guest time
    # is already inside user and nice.
    busy = sum(fields[:8]) - fields[3] - fields[4]
    return busy / os.sysconf("SC_CLK_TCK")


def others_cores(start: CpuClock, end: CpuClock) -> float | None:
    """Cores' worth of CPU that other processes used between two readings (``None`` if unknown)."""
    wall = end.at - start.at
    if start.machine_busy_s is None or end.machine_busy_s is None or wall <= 0:
        return None
    others = (end.machine_busy_s - start.machine_busy_s) - (end.own_s - start.own_s)
    return max(0.0, others / wall)


@dataclass(frozen=True)
class LoadWindow:
    """How busy the machine was around a measurement: the one-minute load average before and after, and the
    CPU that processes other than the benchmark used meanwhile."""

    before: float
    after: float
    cores: int
    others_cores: float | None = None

    def note(self) -> str:
        """For the figures' section: the readings and the core count."""
        text = f"load average {self.before:.2f} before and {self.after:.2f} after, on {self.cores} cores"
        if self.others_cores is not None:
            text += f"; other processes used {self.others_cores:.2f} cores during the run"
        return text

    def as_json(self) -> dict[str, float | int | None]:
        """The readings as plain values."""
        return {"before": self.before, "after": self.after, "cores": self.cores, "others_cores": self.others_cores}

    def refusal(self, limit_per_core: float = MAX_WRITE_LOAD_PER_CORE,
                others_per_core: float = MAX_OTHERS_CPU_PER_CORE) -> str | None:
        """Why the figures must not be written, else ``None``: the machine was busy as the run started, or
        other processes took more than ``others_per_core`` x cores during it. Where that CPU is unknown (no
        ``/proc/stat``), the load average after the run is judged like the one before."""
        limit = limit_per_core * self.cores
        others_limit = others_per_core * self.cores
        if self.others_cores is not None:
            if self.before <= limit and self.others_cores <= others_limit:
                return None
            why = (f"the {self.note()}: the limits are a load of {limit:g} ({limit_per_core:g} per core) "
                   f"before the run and {others_limit:g} cores ({others_per_core:g} per core) for other "
                   "processes during it")
        else:
            if max(self.before, self.after) <= limit:
                return None
            why = f"the {self.note()} is above the limit of {limit:g} ({limit_per_core:g} per core)"
        return (f"not writing BENCHMARKS.md: {why}; figures from a loaded machine are not comparable. "
                "Re-run on an idle machine")


def one_minute_load() -> float:
    """The one-minute load average."""
    return os.getloadavg()[0]


def cores() -> int:
    """Logical CPUs of the machine."""
    return os.cpu_count() or 1


@dataclass(frozen=True)
class LoadStart:
    """The readings taken as a measurement starts."""

    load: float
    clock: CpuClock

    def window(self) -> LoadWindow:
        """The window from this start to now."""
        return LoadWindow(self.load, one_minute_load(), cores(), others_cores(self.clock, cpu_clock()))

    def refusal(self) -> str | None:
        """Why a run meant to be written should not start (the machine is busy now), else ``None``."""
        return LoadWindow(self.load, self.load, cores()).refusal()


def load_start() -> LoadStart:
    """Read the load average and the CPU clocks as a measurement starts."""
    return LoadStart(one_minute_load(), cpu_clock())


def load_note() -> str:
    """How busy the machine was as the figures were taken: CPU rates are only comparable at similar load."""
    one_minute, _, _ = os.getloadavg()
    return f"load average {one_minute:.1f} on {os.cpu_count()} cores when written"
