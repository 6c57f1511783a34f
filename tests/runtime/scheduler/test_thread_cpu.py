"""Per-thread CPU of the process, read from /proc and named by Python's threads."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from runtime.scheduler.thread_cpu import thread_cpu, thread_group

BURN_S = 0.3  # CPU seconds the busy thread spends: many clock ticks (10 ms each) above zero


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_busy_thread_is_listed_by_its_name_with_its_cpu_and_an_idle_one_near_zero() -> None:
    burned, release = threading.Event(), threading.Event()

    def burn() -> None:
        while time.thread_time() < BURN_S:
            pass
        burned.set()
        release.wait(30)

    busy = threading.Thread(target=burn, name="gpurt-test-burner-3", daemon=True)
    idle = threading.Thread(target=release.wait, args=(30,), name="gpurt-test-idle", daemon=True)
    busy.start()
    idle.start()
    try:
        assert burned.wait(30)
        threads = {t.native_id: t for t in thread_cpu()}
    finally:
        release.set()
    assert threads[busy.native_id].name == "gpurt-test-burner-3"
    assert threads[busy.native_id].cpu_s >= BURN_S - 0.05  # the kernel counts in clock ticks
    assert threads[idle.native_id].name == "gpurt-test-idle" and threads[idle.native_id].cpu_s < 0.05
    listed = list(threads.values())
    assert listed[0].cpu_s >= listed[-1].cpu_s and threading.main_thread().native_id in threads


def test_threads_of_one_kind_share_a_group_and_no_proc_gives_nothing(tmp_path: Path) -> None:
    assert thread_group("gpurt-job-12") == thread_group("gpurt-job-3") == "gpurt-job-N"
    assert thread_group("gpurt-job-conclude-0") == "gpurt-job-conclude-N" != thread_group("gpurt-job-0")
    assert thread_group("IO loop") == "IO loop"
    assert thread_cpu(tmp_path / "absent") == []
