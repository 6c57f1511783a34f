"""The soak's memory trend: least-squares growth per 10,000 jobs over the run's second half."""

from __future__ import annotations

import numpy as np
import pytest

from bench.runtime.soak import FLAT_MB_PER_10K_JOBS, MIN_TREND_JOBS, RssSample, rss_trend


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
