"""Opt-in tracemalloc snapshots of the gpu-scheduler's process, and which allocation sites grew between two.

With ``GPURT_TRACEMALLOC_DIR`` set, the scheduler starts ``tracemalloc`` before anything else, writes a
snapshot there every ``GPURT_TRACEMALLOC_PERIOD_S`` seconds and once more as it exits, and keeps the first
snapshot and the newest ``GPURT_TRACEMALLOC_KEEP`` (docs/scheduler.md#memory-over-time). Tracing costs
CPU on every allocation and memory for every live block, so it is for finding a leak, not for running.

``python -m runtime.scheduler.memory_trace DIR`` prints the allocation sites that grew most between the
first and the newest snapshot of one process in ``DIR`` (docs/runbooks/scheduler-memory.md).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import threading
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from runtime.scheduler.periodic import Periodic

# Frames kept per allocation: enough to see which caller of a generic site (a dict resize, a pickle
# load) holds the memory; each frame costs tracemalloc memory on every live block.
TRACE_FRAMES: Final = 12
SUFFIX: Final = ".tracemalloc"
# tracemalloc-<pid>-<sequence>.tracemalloc: sorting by name orders one process's snapshots in time.
_NAME: Final = re.compile(r"tracemalloc-(?P<pid>\d+)-(?P<seq>\d{6})" + re.escape(SUFFIX))

log = logging.getLogger(__name__)


class MemoryTraceError(RuntimeError):
    """The snapshots asked for are not there or cannot be read; the message names the folder or file."""


class MemoryTracer:
    """Traces the process's allocations and writes numbered snapshots to ``directory``.

    ``start`` begins tracing and writes snapshot 0 (the baseline, never removed); every ``period_s`` and at
    ``stop`` another one follows, and only the newest ``keep`` of those stay, so a long run's disk use
    is bounded.
    """

    def __init__(self, directory: Path, period_s: float, keep: int, frames: int = TRACE_FRAMES) -> None:
        if keep < 1:
            raise ValueError("keep must be at least 1")
        self.directory = directory
        self._keep = keep
        self._frames = frames
        self._seq = 0
        self._lock = threading.Lock()  # the periodic thread and stop() may write at once
        self._periodic = Periodic("gpurt-tracemalloc", self.write_snapshot, period_s)
        self._started_tracing = False

    def start(self) -> None:
        """Start tracing (unless something already traces) and write the baseline snapshot."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if not tracemalloc.is_tracing():
            tracemalloc.start(self._frames)
            self._started_tracing = True
        self.write_snapshot()
        self._periodic.start()
        log.info("tracemalloc on: snapshots in %s", self.directory)

    def stop(self) -> None:
        """Write the last snapshot and stop tracing (idempotent)."""
        self._periodic.stop()
        if tracemalloc.is_tracing():
            try:
                self.write_snapshot()
            except OSError as exc:  # a full disk must not turn a clean exit into a traceback
                log.warning("could not write the exit tracemalloc snapshot to %s: %s", self.directory, exc)
            if self._started_tracing:
                tracemalloc.stop()
                self._started_tracing = False

    def write_snapshot(self) -> Path:
        """Take a snapshot now and write it atomically (readers never see half a file); returns its path."""
        with self._lock:
            # Unfiltered: filter_traces matches every frame of every trace in Python, which held the
            # scheduler for minutes; what the tracer allocates itself is small and shows as its own site.
            snapshot = tracemalloc.take_snapshot()
            path = self.directory / f"tracemalloc-{os.getpid()}-{self._seq:06d}{SUFFIX}"
            partial = path.with_name(path.name + ".partial")
            try:
                snapshot.dump(str(partial))
                partial.replace(path)
            except OSError:
                partial.unlink(missing_ok=True)
                raise
            self._seq += 1
            self._prune()
        return path

    def _prune(self) -> None:
        mine = snapshots(self.directory, os.getpid())
        for old in mine[1:-self._keep]:  # the baseline stays: growth is measured against it
            old.unlink(missing_ok=True)


def snapshots(directory: Path, pid: int | None = None) -> list[Path]:
    """The snapshots of process ``pid`` in ``directory``, oldest first (``None``: of the newest one's process)."""
    found = [(int(m["pid"]), int(m["seq"]), p) for p in directory.glob(f"*{SUFFIX}")
             if (m := _NAME.fullmatch(p.name))]
    if pid is None and found:
        pid = max(found, key=lambda item: item[2].stat().st_mtime)[0]
    return [path for owner, _, path in sorted(found) if owner == pid]


@dataclass(frozen=True)
class Growth:
    """One allocation site's change between two snapshots."""

    size_diff: int  # bytes
    count_diff: int  # live blocks
    size: int  # bytes in the later snapshot
    frames: tuple[str, ...]  # "file:line", innermost first


def top_growth(early: Path, late: Path, limit: int = 10, frames: int = 4) -> list[Growth]:
    """The ``limit`` allocation sites (call stacks cut to ``frames``) that grew most from ``early`` to ``late``."""
    before, after = _load(early), _load(late)
    diffs = after.compare_to(before, "traceback")
    merged: dict[tuple[str, ...], list[int]] = {}
    for diff in diffs:  # stacks that differ only beyond ``frames`` count as one site
        key = tuple(f"{frame.filename}:{frame.lineno}" for frame in reversed(diff.traceback[-frames:]))
        totals = merged.setdefault(key, [0, 0, 0])
        totals[0] += diff.size_diff
        totals[1] += diff.count_diff
        totals[2] += diff.size
    ranked = sorted(merged.items(), key=lambda item: item[1][0], reverse=True)[:limit]
    return [Growth(size_diff=s, count_diff=c, size=t, frames=key) for key, (s, c, t) in ranked if s > 0]


def format_growth(growth: list[Growth], early: Path, late: Path) -> str:
    """The growth for people: one block per site, the biggest first."""
    if not growth:
        return f"no allocation site grew between {early.name} and {late.name}"
    lines = [f"allocation sites that grew most between {early.name} and {late.name}:"]
    for item in growth:
        lines.append(f"{item.size_diff / 1024:+10.1f} KiB {item.count_diff:+8d} blocks "
                     f"(now {item.size / 1024:.1f} KiB)  {item.frames[0]}")
        lines.extend(f"{'':37}called from {frame}" for frame in item.frames[1:])
    return "\n".join(lines)


def _load(path: Path) -> tracemalloc.Snapshot:
    try:
        return tracemalloc.Snapshot.load(str(path))
    except Exception as exc:  # a snapshot is a pickle: a foreign or cut file raises whatever its bytes say
        raise MemoryTraceError(f"{path}: not a readable tracemalloc snapshot: {exc}") from None


def growth_report(directory: Path, pid: int | None = None, limit: int = 10) -> str:
    """The growth between the first and the newest snapshot of one process in ``directory``, for people."""
    if not directory.is_dir():
        raise MemoryTraceError(f"{directory}: no such folder")
    mine = snapshots(directory, pid)
    if len(mine) < 2:
        who = f"process {pid}" if pid is not None else "any process"
        raise MemoryTraceError(f"{directory}: {len(mine)} snapshot(s) of {who}; two are needed "
                               f"(files tracemalloc-<pid>-<n>{SUFFIX})")
    return format_growth(top_growth(mine[0], mine[-1], limit), mine[0], mine[-1])


def main(argv: list[str] | None = None) -> int:
    """Print which allocation sites grew between the first and newest snapshot in a folder."""
    parser = argparse.ArgumentParser(prog="python -m runtime.scheduler.memory_trace", description=main.__doc__)
    parser.add_argument("directory", type=Path, help="the folder GPURT_TRACEMALLOC_DIR named")
    parser.add_argument("--pid", type=int, default=None, help="whose snapshots (default: the newest one's process)")
    parser.add_argument("--limit", type=int, default=10, help="how many sites to show (default 10)")
    args = parser.parse_args(argv)
    try:
        print(growth_report(args.directory, args.pid, args.limit))
    except MemoryTraceError as exc:
        print(f"memory_trace: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
