"""Where a job slot's time goes: py-spy samples of the scheduler during the end-to-end phase.

Every stream runs its jobs on slot threads (``SlotScheduler``), one job at a time each, so the wall time
of those threads split by what they were doing is the path of a job through the scheduler: waiting for
the next message, Dask, the store, the publish, the ack. py-spy samples every thread, idle ones included,
without touching the process (it needs ptrace rights: root, or ``kernel.yama.ptrace_scope`` 0).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Final

SAMPLES_PER_S: Final = 100  # enough for stages of a few per cent over a run of seconds
STOP_TIMEOUT_S: Final = 30.0  # py-spy writes its file on SIGINT; a loaded machine may take a while
SLOT_FRAME: Final = "SlotScheduler._work"
# Stages of a slot's time, each named by a frame that is on the stack while the slot does it; the first
# match wins. A slot thread with none of them on its stack waits for its next message.
STAGES: Final = (
    ("Dask: submit, run, fetch the result", ("DaskBackend.run ", "DaskBackend.run_pack")),
    ("publish the result", ("publish_result",)),
    ("store: write result and marker", ("ResultStore.put ", "ResultStore.mark_published", "ResultStore.put_artifacts")),
    ("store: read result and cancel marker", ("ResultStore.get ", "ResultStore.cancel_requested",
                                              "ResultStore.is_published")),
    ("ack", ("Message.ack", "Message.nack")),
    ("parse, log, the rest of the processor", ("Consumer._on_message",)),
)
WAITING: Final = "wait for the next message (ack → broker → receipt)"


class ProfileError(RuntimeError):
    """py-spy is missing or could not sample the process."""


@dataclass(frozen=True)
class StageShare:
    """One stage: its share of the slots' time and what that is per job (seconds)."""

    stage: str
    share: float
    per_job_s: float


class SlotProfiler:
    """Samples one process with py-spy between ``start`` and ``stop``."""

    def __init__(self, pid: int, output: Path) -> None:
        self._pid = pid
        self._output = output
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Begin sampling."""
        binary = py_spy()
        self._process = subprocess.Popen(
            [binary, "record", "--pid", str(self._pid), "--rate", str(SAMPLES_PER_S), "--idle", "--nonblocking",
             "--format", "raw", "--output", str(self._output)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def stop(self) -> str:
        """Stop sampling; returns the samples (py-spy's raw format: one stack and its count a line)."""
        if self._process is None:
            raise ProfileError("the profiler was not started")
        process, self._process = self._process, None
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            _, stderr = process.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise ProfileError("py-spy did not stop in time") from None
        if not self._output.exists():
            raise ProfileError(f"py-spy recorded nothing: {stderr.decode(errors='replace').strip()[-300:]}")
        return self._output.read_text()


def py_spy() -> str:
    """The py-spy program: beside this interpreter (a virtual environment need not be activated), else on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise ProfileError("--profile needs py-spy, a dev dependency: uv sync --group dev")
    return found


def slot_stages(raw: str, slot_seconds_per_job: float) -> list[StageShare]:
    """Split the slot threads' samples of ``raw`` into stages, largest first.

    ``slot_seconds_per_job`` is slots * wall time / jobs: the slot time one job takes, which the shares
    divide into seconds per job.
    """
    counts: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if SLOT_FRAME not in stack or not count.isdigit():
            continue
        counts[_stage(stack)] += int(count)
    total = sum(counts.values())
    if not total:
        return []
    return [StageShare(stage, n / total, n / total * slot_seconds_per_job) for stage, n in counts.most_common()]


def _stage(stack: str) -> str:
    for stage, frames in STAGES:
        if any(frame in stack for frame in frames):
            return stage
    return WAITING
