"""CPU time of each thread of this process, by thread name: where the gpu-scheduler's own CPU goes.

The process's CPU is the sum of its threads' (``/proc/self/task/<tid>/stat``, Linux): the job slots, the
concluding threads, the Dask client's event loop, the Pub/Sub client's stream and dispatcher, the leader's
loop, the API. Read twice, the difference says which of them a load of jobs kept busy, which a process-wide
figure cannot (docs/scheduler.md, "Per-job cost"). Python names its threads; the others (gRPC's core, native
libraries) go by the kernel's name for them.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Final

from pydantic import BaseModel, Field

TASKS: Final = Path("/proc/self/task")
_CLOCK_TICKS_PER_S: Final = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class ThreadCpu(BaseModel):
    """One thread's CPU seconds so far (user and system together)."""

    name: str = Field(description="The Python thread's name, else the kernel's name for the thread.")
    native_id: int
    cpu_s: float


def thread_cpu(tasks: Path = TASKS) -> list[ThreadCpu]:
    """Every live thread of this process with its CPU seconds, busiest first; empty where ``/proc`` is not."""
    named = {thread.native_id: thread.name for thread in threading.enumerate()}
    threads = []
    for task in tasks.glob("[0-9]*") if tasks.is_dir() else ():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        tid = int(task.name)
        comm, _, rest = stat.partition("(")[2].rpartition(")")
        fields = rest.split()
        # After the name: state (field 3) ... utime (14) and stime (15), counted from field 3 here.
        ticks = int(fields[11]) + int(fields[12])
        threads.append(ThreadCpu(name=named.get(tid, comm), native_id=tid, cpu_s=ticks / _CLOCK_TICKS_PER_S))
    return sorted(threads, key=lambda thread: (-thread.cpu_s, thread.name))


def thread_group(name: str) -> str:
    """A thread's kind: its name with numbers replaced (``gpurt-job-3`` -> ``gpurt-job-N``), so the slots, the
    concluding threads or a pool's workers add up as one."""
    return re.sub(r"\d+", "N", name)
