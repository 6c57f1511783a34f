"""A fresh worker's first job, warmed and cold, in processes of their own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpurt.bench.kernels import runner, warm_start
from gpurt.bench.kernels.warm_start import WARM_REPEATS, WarmStart, markdown


@pytest.mark.slow  # two fresh processes, one of them warming every kernel
@pytest.mark.timeout(300)
def test_bench_kernels_times_a_fresh_workers_first_job_warmed_and_cold(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpurt.cli.app import app

    monkeypatch.setattr(runner, "cases", lambda device, scale: [])
    # The empty-cache process itself (a compile from nothing: 25 s of CPU for one job type's kernels, a minute
    # for all) is test_an_empty_cache_run_compiles_into_its_own_folder's; here, what the bench asks of it and
    # reports from it.
    asked: list[tuple[bool, str, object]] = []

    def warm_up_in(cache: Path, device: str, job_types: object = None) -> dict[str, float]:
        asked.append((cache.is_dir() and not any(cache.iterdir()), device, job_types))
        return {"warm_up_s": 58.0, "first_s": 0.004}

    monkeypatch.setattr(warm_start, "warm_up_in", warm_up_in)
    result = CliRunner().invoke(app, ["bench", "kernels", "--device", "cpu", "--json", "--no-stac", "--empty-cache"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)["warm_start"]
    assert figures["warm_up_s"] > 0 and figures["warm_s"] > 0
    assert asked == [(True, "cpu", None)]  # an empty folder, warming every job type as a worker does
    assert (figures["empty_cache_warm_up_s"], figures["empty_cache_first_s"]) == (58.0, 0.004)
    # The warm-up moved the kernel's compile or cache load out of the first job: without it, the job pays it.
    assert figures["cold_first_s"] > figures["warmed_first_s"]
    assert figures["warmed_ratio"] == pytest.approx(figures["warmed_first_s"] / figures["warm_s"])


def test_markdown_shows_both_first_jobs_against_warm() -> None:
    figures = WarmStart("gpu", warm_up_s=3.5, warmed_first_s=0.003, cold_first_s=1.2, warm_s=0.002)
    text = markdown(figures, "NVIDIA H100 80GB HBM3", "2026-11-26")
    assert text.startswith("## A fresh worker's first job on GPU — 2026-11-26")
    assert "| warmed worker | 3.50 s | 3.00 ms | 1.5x |" in text
    assert "| no warm-up | — | 1200.00 ms | 600.0x |" in text
    assert f"median of {WARM_REPEATS}" in text


@pytest.mark.slow  # compiles one job type's kernels from nothing in a fresh process
@pytest.mark.timeout(300)
def test_an_empty_cache_run_compiles_into_its_own_folder(tmp_path: Path) -> None:
    figures = warm_start.warm_up_in(tmp_path, "cpu", ["european_option"])
    assert figures["warm_up_s"] > 0 and figures["first_s"] > 0
    # numba wrote the kernels it compiled into that folder (an index per kernel), not into the checkout's cache
    assert any(tmp_path.rglob("*.nbi"))


def test_markdown_adds_the_empty_cache_row_where_measured() -> None:
    figures = WarmStart("cpu", warm_up_s=2.8, warmed_first_s=0.003, cold_first_s=1.2, warm_s=0.002,
                        empty_cache_warm_up_s=58.0, empty_cache_first_s=0.004)
    text = markdown(figures, "2 cores", "2026-11-28")
    assert "| warmed worker, empty numba cache | 58.00 s | 4.00 ms | 2.0x |" in text
    assert "empty numba cache" not in markdown(WarmStart("cpu", 2.8, 0.003, 1.2, 0.002), "2 cores", "2026-11-28")
