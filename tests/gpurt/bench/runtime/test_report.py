"""A run's JSON read back as the baseline of a later run, and the rows both are shown with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpurt.bench.runtime.cpu import CpuShare
from gpurt.bench.runtime.end_to_end import RuntimeFigures
from gpurt.bench.runtime.goals import judge
from gpurt.bench.runtime.profile import StageShare
from gpurt.bench.runtime.report import (
    baseline_rows,
    cpu_rows,
    figure_rows,
    profile_of,
    read_baseline,
    run_json,
    stage_rows,
)


def _run(workers: int, e2e_wall_s: float, stages: tuple[StageShare, ...] = (),
         cpu: tuple[CpuShare, ...] = (), alone_cpu: float | None = None) -> RuntimeFigures:
    return RuntimeFigures(jobs=100, completed=100, workers=workers, e2e_wall_s=e2e_wall_s, queue_wait_p50_s=0.1,
                          queue_wait_p95_s=0.2, latency_p50_s=0.3, latency_p95_s=0.4, direct_wall_s=0.25,
                          per_worker_wall_s=0.5, load_average=2.0, stages=stages, cpu=cpu,
                          per_worker_cpu_per_job_s=alone_cpu)


def test_a_runs_json_reads_back_as_a_baseline(tmp_path: Path) -> None:
    runs = [_run(1, 2.0, (StageShare("Dask", 0.5, 0.01), StageShare("wait", 0.5, 0.01))), _run(2, 1.0)]
    path = tmp_path / "before.json"
    path.write_text(json.dumps(run_json(100, "2026-11-23 20:00 UTC", runs, judge(runs))))
    baseline = read_baseline(path)
    assert [r.workers for r in baseline.runs] == [1, 2]
    rows = dict(baseline_rows(baseline))
    assert rows["end-to-end throughput"] == ["50.0 jobs/s", "100.0 jobs/s"]
    assert rows["end-to-end / Dask alone"] == ["12%", "25%"]
    assert profile_of(baseline.runs[0]) == [("Dask", 0.5, 0.01), ("wait", 0.5, 0.01)]


def test_a_file_that_is_no_run_is_refused_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text('{"jobs": 3}')
    with pytest.raises(ValueError, match=r"other\.json is not the JSON of `gpurt bench runtime --json`"):
        read_baseline(path)


def test_stage_rows_align_worker_counts_and_mark_missing_stages() -> None:
    rows = stage_rows([[("Dask", 0.6, 0.006), ("wait", 0.4, 0.004)], [("Dask", 0.7, 0.007), ("ack", 0.3, 0.003)]])
    assert rows == [("Dask", ["6 ms (60%)", "7 ms (70%)"]), ("wait", ["4 ms (40%)", "-"]),
                    ("ack", ["-", "3 ms (30%)"])]


def test_cpu_per_process_is_shown_per_worker_count_and_read_back_from_a_baseline(tmp_path: Path) -> None:
    runs = [_run(1, 2.0, cpu=(CpuShare("scheduler", 0.006), CpuShare("emulator", 0.003)), alone_cpu=0.004),
            _run(2, 1.0, cpu=(CpuShare("scheduler", 0.007), CpuShare("workers", 0.002)), alone_cpu=0.005)]
    assert cpu_rows(runs) == [("scheduler", ["6 ms", "7 ms"]), ("emulator", ["3 ms", "-"]),
                              ("workers", ["-", "2 ms"])]
    figures = dict(figure_rows(runs))
    assert figures["CPU per job, every process end to end"] == ["9 ms", "9 ms"]
    assert figures["… Dask alone, one job per worker"] == ["4 ms", "5 ms"]
    path = tmp_path / "before.json"
    path.write_text(json.dumps(run_json(100, "2026-11-24 12:00 UTC", runs, judge(runs))))
    baseline = read_baseline(path)
    assert cpu_rows(baseline.runs) == cpu_rows(runs)
    assert dict(baseline_rows(baseline))["… Dask alone, one job per worker"] == ["4 ms", "5 ms"]


def test_a_run_without_cpu_figures_shows_no_cpu_rows() -> None:
    figures = dict(figure_rows([_run(1, 2.0)]))
    assert "CPU per job, every process end to end" not in figures
