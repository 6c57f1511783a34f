"""The utilization benchmark's figures and goals, from figures given here (no platform is started)."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from gpurt.bench.runtime.dask_floor import DaskFloor, measure_dask_floor
from gpurt.bench.runtime.utilization import (
    ENDED_THREADS,
    MAX_FIRST_JOB_SLOWDOWN,
    MAX_SCHEDULER_CPU_PER_JOB_S,
    Burst,
    FirstJob,
    Stream,
    UtilizationFigures,
    _per_job,
    judge,
    merge,
)
from gpurt.cli.bench.utilization import THREAD_KINDS_SHOWN, _tables, markdown


def _burst(workers: int, sleep_s: float, makespan_s: float, jobs: int = 100, cpu_s: float = 0.001) -> Burst:
    return Burst(workers, sleep_s, jobs, jobs, makespan_s, cpu_s)


def test_utilization_is_the_busy_share_of_the_slots_over_the_makespan() -> None:
    # 100 jobs of 50 ms on 4 workers: 5 s of work over 4 slots; 1.5625 s of makespan is 80 % busy.
    assert _burst(4, 0.05, makespan_s=1.5625).utilization == 0.8
    assert _burst(1, 0.01, makespan_s=1.0).utilization == 1.0  # back to back, no gap between jobs
    partial = Burst(4, 0.2, jobs=100, completed=50, makespan_s=5.0, scheduler_cpu_per_job_s=0.0)
    assert partial.utilization == 0.5  # only completed jobs count as work done
    assert Burst(1, 0.2, 1, 0, float("nan"), 0.0).utilization == 0.0
    numbers = json.loads(json.dumps(_burst(4, 0.05, makespan_s=1.5625).as_json()))
    assert numbers["jobs_per_s"] == 64.0 and numbers["utilization"] == 0.8


def test_goals_judge_the_named_cells_the_worst_scheduler_cpu_and_the_stream_wait() -> None:
    figures = UtilizationFigures(
        bursts=(_burst(4, 0.2, makespan_s=100 * 0.2 / 4 / 0.96), _burst(4, 0.05, makespan_s=100 * 0.05 / 4 / 0.80),
                _burst(1, 0.01, makespan_s=1.0 / 0.71, cpu_s=MAX_SCHEDULER_CPU_PER_JOB_S + 0.001),
                _burst(1, 0.2, makespan_s=40.0)),  # not a goal cell: measured, not judged
        streams=(Stream(4, 0.05, 64.0, 100, 100, 0.02, 0.099), Stream(1, 0.05, 16.0, 100, 100, 0.05, 0.101)),
        load_average=1.0)
    goals = {g.name: g.met for g in judge(figures)}
    assert goals == {
        "slot utilization, 4 workers, 200 ms jobs": True,
        "slot utilization, 4 workers, 50 ms jobs": False,
        "slot utilization, 1 worker, 10 ms jobs": True,
        "scheduler CPU per job (worst cell)": False,
        "p95 queue wait at 80% load, 4 workers, 50 ms jobs": True,
        "p95 queue wait at 80% load, 1 worker, 50 ms jobs": False,
    }


def test_runs_of_several_worker_counts_merge_and_render_with_their_load() -> None:
    one = UtilizationFigures((_burst(1, 0.05, 6.0),), (Stream(1, 0.05, 16.0, 10, 10, None, None),), 2.0)
    four = UtilizationFigures((_burst(4, 0.05, 1.6),), (), 3.5)
    merged = merge([one, four])
    assert [b.workers for b in merged.bursts] == [1, 4] and merged.load_average == 3.5
    text = markdown(merged, judge(merged), "2026-01-01 00:00 UTC")
    assert "| 4 | 50 ms | 100 | 1.6 s | 78% | 62.5 | 1 ms |" in text
    assert "p95 queue wait at 80% load, 1 worker, 50 ms jobs | <= 100 ms | n/a | **no** |" in text
    terminal = Console(width=200, record=True)
    for table in _tables(merged, judge(merged)):
        terminal.print(table)
    shown = terminal.export_text()
    assert "bursts: jobs published at once" in shown and "steady stream at 80 % of capacity" in shown
    assert "1.6 s" in shown


def test_the_first_job_on_a_fresh_platform_is_judged_against_the_same_job_warm() -> None:
    warm = 0.010
    figures = UtilizationFigures((), (), 1.0, first_jobs=(
        FirstJob(1, cold_to_first_result_s=30.0, first_run_s=MAX_FIRST_JOB_SLOWDOWN * warm, warm_run_s=warm),
        FirstJob(4, cold_to_first_result_s=30.0, first_run_s=8.0, warm_run_s=warm)))  # compiled inside the job
    goals = judge(figures)
    assert [(g.name, g.met) for g in goals] == [
        ("first european_option run time on a fresh platform, 1 worker", True),
        ("first european_option run time on a fresh platform, 4 workers", False)]
    assert "| 4 | 30 s | 8 s | 10 ms |" in markdown(figures, goals, "2026-01-01 00:00 UTC")
    assert merge([figures]).first_jobs == figures.first_jobs


def test_cpu_by_thread_is_per_job_busiest_first_and_leaves_idle_threads_out() -> None:
    before = {1: ("gpurt-job-N", 1.0), 2: ("IO loop", 2.0), 3: ("gpurt-singletons", 0.5)}
    after = {1: ("gpurt-job-N", 1.3), 2: ("IO loop", 2.6), 3: ("gpurt-singletons", 0.5),
             4: ("AnyIO worker thread", 0.1)}
    # per 100 jobs; a thread that started during the burst counts whole; the live threads account for it all
    spent = _per_job(before, after, process_cpu_s=1.0, jobs=100)
    assert [kind for kind, _ in spent] == ["IO loop", "gpurt-job-N", "AnyIO worker thread"]
    assert [per_job for _, per_job in spent] == pytest.approx([0.006, 0.003, 0.001])


def test_cpu_of_threads_that_ended_is_one_row_and_a_new_thread_of_an_old_name_counts_whole() -> None:
    # A replaced stream: its slot thread (tid 1) ended, a new one of the same name (tid 5) took over.
    before = {1: ("gpurt-job-N", 4.0), 2: ("IO loop", 2.0)}
    after = {5: ("gpurt-job-N", 0.2), 2: ("IO loop", 2.4)}
    spent = dict(_per_job(before, after, process_cpu_s=1.0, jobs=100))
    assert spent == pytest.approx({"IO loop": 0.004, ENDED_THREADS: 0.004, "gpurt-job-N": 0.002})


def test_cpu_by_thread_renders_a_column_per_burst_and_sums_the_less_busy_kinds() -> None:
    kinds = tuple((f"kind-{i}", 0.001 * (20 - i)) for i in range(THREAD_KINDS_SHOWN + 2))
    bursts = (Burst(1, 0.01, 100, 100, 1.0, 0.02, threads=kinds),
              Burst(4, 0.2, 100, 100, 5.0, 0.01, threads=(("kind-0", 0.004),)))
    figures = UtilizationFigures(bursts, (), 1.0)
    text = markdown(figures, judge(figures), "2026-01-01 00:00 UTC")
    assert "| thread | 1 w, 10 ms | 4 w, 200 ms |" in text
    assert "| kind-0 | 20 ms | 4 ms |" in text and f"kind-{THREAD_KINDS_SHOWN - 1} |" in text
    assert f"kind-{THREAD_KINDS_SHOWN} |" not in text
    assert "| (the others) | 23 ms | 0 ms |" in text  # kinds 8 and 9: 12 ms + 11 ms
    assert json.loads(json.dumps(bursts[1].as_json()))["scheduler_threads_cpu_per_job_s"] == {"kind-0": 0.004}


def test_the_bare_dask_floor_stands_beside_the_cpu_goal_and_in_the_written_section() -> None:
    floor = DaskFloor(tasks=300, client_cpu_per_task_s=0.0025, wall_per_task_s=0.012)
    figures = UtilizationFigures((_burst(1, 0.2, makespan_s=40.0, cpu_s=0.012),), (), 1.0, dask_floor=floor)
    (cpu_goal,) = [g for g in judge(figures) if g.name == "scheduler CPU per job (worst cell)"]
    assert cpu_goal.measured == "12 ms (1 worker, 200 ms jobs; a bare Dask client: 2.5 ms per task)"
    text = markdown(figures, judge(figures), "2026-01-01 00:00 UTC")
    assert "spends 2.5 ms of CPU per task submitted, waited for and fetched (300 tasks one at a time, 12 ms" in text
    assert json.loads(json.dumps(figures.as_json()))["dask_floor"]["client_cpu_per_task_s"] == 0.0025


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_bare_dask_client_is_measured_on_a_scheduler_and_worker_of_its_own() -> None:
    floor = measure_dask_floor(tasks=10)
    assert floor.tasks == 10
    # Each task is a round trip through two other processes: it takes wall time, and costs this client CPU.
    assert floor.wall_per_task_s > 0 and floor.client_cpu_per_task_s > 0
