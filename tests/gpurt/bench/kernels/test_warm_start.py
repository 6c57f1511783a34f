"""A fresh worker's first job, warmed and cold, in processes of their own."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpurt.bench.kernels import runner
from gpurt.bench.kernels.warm_start import WARM_REPEATS, WarmStart, markdown


@pytest.mark.slow  # two fresh processes, one of them warming every kernel
@pytest.mark.timeout(300)
def test_bench_kernels_times_a_fresh_workers_first_job_warmed_and_cold(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpurt.cli.app import app

    monkeypatch.setattr(runner, "cases", lambda device, scale: [])
    result = CliRunner().invoke(app, ["bench", "kernels", "--device", "cpu", "--json", "--no-stac"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)["warm_start"]
    assert figures["warm_up_s"] > 0 and figures["warm_s"] > 0
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
