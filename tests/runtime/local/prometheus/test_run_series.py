"""The report's Prometheus panels from their data functions: the window covers the run, and jobs finished per
second add up to the jobs the run's table shows finished (no Prometheus needed: samples are built here the
way Prometheus takes them, one scrape per interval, a series born at its first increment)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import pytest

from runtime.access.prometheus_api import Series
from runtime.local.prometheus import run_series
from runtime.local.prometheus.run_series import MAX_POINTS, PANELS, finished_per_second, panel_of, run_grid

SCRAPE_S = 1.0
START = 1_700_000_000.0


def _scraped_counter(finish_times: list[float], times: list[float]) -> list[tuple[float, float]]:
    """The counter as a range query returns it: at each time, its value at the latest scrape before; absent
    before the scrape that first saw it (the first finished job creates the series at 1)."""
    points = []
    for t in times:
        scraped_at = START + math.floor((t - START) / SCRAPE_S) * SCRAPE_S
        count = sum(1 for f in finish_times if f <= scraped_at)
        if count:
            points.append((t, float(count)))
    return points


@pytest.mark.parametrize(("span_s", "expected_step_s"), [(25.0, 1.0), (12.3, 1.0), (900.0, 900.0 / (MAX_POINTS - 1))])
def test_the_grid_covers_the_run_in_whole_steps(span_s: float, expected_step_s: float) -> None:
    grid = run_grid(START, START + span_s, SCRAPE_S)
    assert grid.start == START and grid.step_s == pytest.approx(expected_step_s)
    assert START + span_s <= grid.end < START + span_s + grid.step_s  # the last result is inside
    assert grid.points <= MAX_POINTS and grid.times()[-1] == pytest.approx(grid.end)


def test_jobs_finished_per_second_add_up_to_the_jobs_of_the_table_from_the_first_finish() -> None:
    # The job table: 12 jobs succeed from 0.4 s into the run on, 3 fail; the run ends with the last result.
    succeeded = [START + 0.4 + 1.7 * i for i in range(12)]
    failed = [START + 3.2, START + 9.9, START + 17.5]
    end = max(succeeded + failed)
    grid = run_grid(START, end, SCRAPE_S)
    counters = [Series(labels={"status": "succeeded"}, points=_scraped_counter(succeeded, grid.times())),
                Series(labels={"status": "failed"}, points=_scraped_counter(failed, grid.times()))]
    (spec,) = [s for s in PANELS if s.counter]
    panel = panel_of(spec, counters, grid)
    lines = {line.label: line.points for line in panel.lines}
    for status, finishes in (("succeeded", succeeded), ("failed", failed)):
        points = lines[status]
        assert points[0][0] == 0 and points[-1][0] == pytest.approx(grid.end - START)  # the whole window
        assert sum(rate * grid.step_s for _, rate in points) == pytest.approx(len(finishes))
        # The first scrape after the first finish shows it: the panel does not read 0 while jobs finish.
        first_seen = math.floor(finishes[0] - START) + 1.0
        assert next(t for t, rate in points if rate > 0) == pytest.approx(first_seen)


def test_a_counter_reset_and_missing_samples_count_from_zero_again() -> None:
    grid = run_grid(START, START + 4, SCRAPE_S)
    # Samples 0..4 s: 5 before the run (not the run's), then 7, absent (no scrape), 2 after a restart, 3.
    points = [(START, 5.0), (START + 1, 7.0), (START + 3, 2.0), (START + 4, 3.0)]
    assert finished_per_second(points, grid) == [(START, 0.0), (START + 1, 2.0), (START + 2, 0.0),
                                                 (START + 3, 2.0), (START + 4, 1.0)]
    # Prometheus answers with millisecond timestamps; a grid may start at any float.
    shifted = run_grid(START + 0.0004, START + 4, SCRAPE_S)
    assert [rate for _, rate in finished_per_second(points, shifted)] == [0.0, 2.0, 0.0, 2.0, 1.0]


def test_gauges_pass_through_and_a_panel_without_samples_has_no_lines() -> None:
    grid = run_grid(START, START + 2, SCRAPE_S)
    backlog = next(s for s in PANELS if s.title == "Request backlog")
    series = Series(labels={}, points=[(START, 6.0), (START + 1, float("nan")), (START + 2, 0.0)])
    panel = panel_of(backlog, [series], grid)
    assert panel.lines[0].points == [(0.0, 6.0), (2.0, 0.0)]
    assert panel_of(backlog, [], grid).lines == []


class _FakePrometheus:
    """Answers the queries collect_run_series makes; every target is scraped again at each poll."""

    queries: ClassVar[list[tuple[str, float, float, float]]] = []

    def __init__(self, url: str) -> None:
        self._now = START

    def __enter__(self) -> _FakePrometheus:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def query(self, expr: str) -> list[tuple[dict[str, Any], float]]:
        assert expr == "min(timestamp(up))"  # every target: the emulator's backlog too, not only the scheduler
        self._now += SCRAPE_S
        return [({}, self._now)]

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> list[Series]:
        type(self).queries.append((expr, start, end, step_s))
        return [Series(labels={"status": "succeeded"}, points=[(start, 1.0), (end, 2.0)])]


def test_collect_reads_every_panel_over_the_whole_run_and_states_its_sampling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_series, "PrometheusApi", _FakePrometheus)
    monkeypatch.setattr(run_series, "SCRAPE_INTERVAL_S", SCRAPE_S)
    monkeypatch.setattr(run_series, "wait_until", lambda predicate, timeout_s, interval_s: predicate())
    series = run_series.collect_run_series("http://prometheus", START, START + 24.5)
    # The last point comes two scrapes after the last result: the latest sample at or before it was taken
    # after the scheduler counted the last job.
    assert {(start, end, step) for _, start, end, step in _FakePrometheus.queries} == {(START, START + 27.0, 1.0)}
    assert series.duration_s == 27.0 and series.resolution() == "scraped every 1 s, a point every 1 s"
    assert [panel.title for panel in series.panels] == [spec.title for spec in PANELS]
