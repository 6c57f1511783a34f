"""The soak's memory trend: least-squares growth per 10,000 jobs over the run's second half."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from gpurt.bench.runtime.soak import (
    FLAT_MB_PER_10K_JOBS,
    MIN_TREND_JOBS,
    RssSample,
    rss_trend,
    soak_growth,
    tracemalloc_env,
)
from runtime.scheduler.memory_trace import MemoryTracer, snapshots
from runtime.scheduler.settings import Settings


def _samples(mb_per_job: float, jobs: int, step: int = 250, wobble_mb: float = 0.4) -> list[RssSample]:
    # A warm-up jump in the first half (caches filling), then a steady slope with an alternating wobble.
    out = []
    for i, done in enumerate(range(0, jobs + 1, step)):
        warm = 30.0 * min(1.0, done / (jobs / 4))
        out.append(RssSample(t_s=i * 2.0, completed=done,
                             rss_mb=150.0 + warm + mb_per_job * done + (wobble_mb if i % 2 else -wobble_mb)))
    return out


@pytest.mark.parametrize("mb_per_10k", [0.0, 1.0, 13.0])
def test_the_trend_is_the_least_squares_slope_of_the_second_half(mb_per_10k: float) -> None:
    samples = _samples(mb_per_10k / 10_000, jobs=20_000)
    trend = rss_trend(samples)

    tail = [s for s in samples if s.completed >= samples[-1].completed / 2]
    reference = np.polyfit([s.completed for s in tail], [s.rss_mb for s in tail], 1)[0] * 10_000
    assert trend.mb_per_10k_jobs == pytest.approx(reference, rel=1e-9, abs=1e-9)
    assert trend.mb_per_10k_jobs == pytest.approx(mb_per_10k, abs=0.2)  # the wobble barely moves it
    assert trend.flat is (mb_per_10k < FLAT_MB_PER_10K_JOBS)
    assert ("flat" if trend.flat else "GROWING") in trend.verdict()
    assert trend.first_mb == samples[0].rss_mb and trend.last_mb == samples[-1].rss_mb


def test_a_short_run_says_it_cannot_tell() -> None:
    trend = rss_trend(_samples(13.0 / 10_000, jobs=MIN_TREND_JOBS))
    assert trend.mb_per_10k_jobs is None and trend.flat is None
    assert "too few jobs" in trend.verdict()
    assert "not measured" in rss_trend([]).verdict()


def _warm_up_allocation(store: list[bytearray]) -> None:
    store.extend(bytearray(4096) for _ in range(300))  # kept, but before the middle of the run


def _late_allocation(store: list[bytearray]) -> None:
    store.extend(bytearray(4096) for _ in range(300))  # kept after the middle: what the soak must name


def test_the_tracemalloc_report_covers_the_middle_of_the_run_to_its_end(tmp_path: Path) -> None:
    if tracemalloc.is_tracing():
        pytest.skip("something else traces allocations in this process")
    tracer = MemoryTracer(tmp_path, period_s=3600.0, keep=100)
    kept: list[bytearray] = []
    tracer.start()  # snapshot 0
    try:
        tracer.write_snapshot()  # 1
        _warm_up_allocation(kept)
        tracer.write_snapshot()  # 2: the middle of 0..3
        _late_allocation(kept)
        tracer.write_snapshot()  # 3
    finally:
        tracer.stop()  # 4: the exit snapshot, which a soak reads before it exists
    (tmp_path / snapshots(tmp_path)[-1].name).unlink()

    report = soak_growth(tmp_path)
    here = Path(__file__).name
    assert f"{here}:{_late_allocation.__code__.co_firstlineno + 1}" in report
    assert f"{here}:{_warm_up_allocation.__code__.co_firstlineno + 1}" not in report
    assert "000002" in report and "000003" in report


def test_too_few_snapshots_say_so(tmp_path: Path) -> None:
    assert "only 0 snapshot(s)" in soak_growth(tmp_path)


@pytest.mark.parametrize(("seconds", "period"), [(30.0, 5.0), (240.0, 20.0), (3600.0, 60.0)])
def test_the_soak_snapshots_about_a_dozen_times_within_bounds(tmp_path: Path, seconds: float, period: float) -> None:
    env = tracemalloc_env(tmp_path, seconds)
    settings = Settings.from_env(env)
    assert settings.tracemalloc_dir == tmp_path
    assert settings.tracemalloc_period_s == period
    assert settings.tracemalloc_keep >= seconds / period + 2  # every snapshot of the run stays
