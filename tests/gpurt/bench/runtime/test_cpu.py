"""CpuMeter against real processes: it reads what a process itself says it spent, part by part."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from gpurt.bench.runtime.cpu import CpuMeter, child_running, children_of, only, with_children

# A child that, on each line it reads, spins until it has spent the given CPU seconds, then prints what
# it spent by its own clock.
SPINNER = """
import sys, time
for line in sys.stdin:
    start = time.process_time()
    while time.process_time() - start < float(line):
        pass
    print(time.process_time() - start, flush=True)
"""
BURN_S = 0.3
JOBS = 10


@pytest.fixture
def spinner() -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen([sys.executable, "-c", SPINNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    yield child
    child.kill()
    child.wait(10)


def _burn(child: subprocess.Popen[str], seconds: float) -> float:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(f"{seconds}\n")
    child.stdin.flush()
    return float(child.stdout.readline())


def test_each_part_gets_the_cpu_its_own_processes_spent(spinner: subprocess.Popen[str]) -> None:
    _burn(spinner, 0.0)  # the interpreter's start-up is not part of the phase
    idle = subprocess.Popen([sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert idle.stdout is not None and idle.stdout.readline() == "ready\n"  # started up before the phase
        meter = CpuMeter({"spinner": only(spinner.pid), "idle": only(idle.pid),
                          "both": only(spinner.pid, idle.pid)})
        meter.start()
        spent = _burn(spinner, BURN_S)
        shares = {share.part: share.per_job_s for share in meter.stop(JOBS)}
    finally:
        idle.kill()
        idle.wait(10)
    assert list(shares) == ["spinner", "idle", "both"]
    assert shares["spinner"] == pytest.approx(spent / JOBS, rel=0.2, abs=0.002)
    assert shares["idle"] < 0.1 * shares["spinner"]
    assert shares["both"] == pytest.approx(shares["spinner"] + shares["idle"], rel=0.05, abs=0.001)


def test_children_of_a_process_are_its_descendants_and_not_itself(spinner: subprocess.Popen[str]) -> None:
    me = os.getpid()
    assert spinner.pid in [p.pid for p in children_of(me)()]
    assert me not in [p.pid for p in children_of(me)()]
    assert {me, spinner.pid} <= {p.pid for p in with_children(me)()}


def test_a_child_running_a_module_is_found_by_it_and_left_out_of_the_other_children(
        spinner: subprocess.Popen[str]) -> None:
    # `python -m json.tool` reads stdin until it closes: a child that runs a module, as the Dask scheduler's does.
    module = subprocess.Popen([sys.executable, "-m", "json.tool"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    try:
        me = os.getpid()
        found = child_running(me, "json.tool")
        assert [p.pid for p in found()] == [module.pid]
        others = {p.pid for p in children_of(me, exclude=found)()}
        assert spinner.pid in others and module.pid not in others
        assert child_running(me, "json")() == []  # the module named exactly, not a prefix of it
    finally:
        module.kill()
        module.wait(10)


def test_a_part_whose_process_is_gone_counts_nothing_instead_of_failing() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(30)
    meter = CpuMeter({"gone": with_children(child.pid)})
    meter.start()
    (share,) = meter.stop(JOBS)
    assert share.part == "gone"
    assert share.per_job_s == 0.0
