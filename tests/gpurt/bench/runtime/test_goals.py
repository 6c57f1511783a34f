"""The runtime benchmark's figures and goals, from figures given here (no platform is started)."""

from __future__ import annotations

import json

from gpurt.bench.runtime.end_to_end import RuntimeFigures
from gpurt.bench.runtime.goals import MAX_OVERHEAD_PER_JOB_S, MIN_SHARE_OF_DASK, judge


def _run(workers: int, e2e_wall_s: float, direct_wall_s: float = 1.0, jobs: int = 1000) -> RuntimeFigures:
    return RuntimeFigures(jobs=jobs, completed=jobs, workers=workers, e2e_wall_s=e2e_wall_s, queue_wait_p50_s=None,
                          queue_wait_p95_s=None, latency_p50_s=None, latency_p95_s=None, direct_wall_s=direct_wall_s,
                          per_worker_wall_s=2.0, load_average=1.0)


def test_figures_are_rates_and_per_job_differences_of_the_walls() -> None:
    run = _run(2, e2e_wall_s=4.0, direct_wall_s=1.0)
    assert run.e2e_jobs_per_s == 250.0 and run.direct_jobs_per_s == 1000.0 and run.per_worker_jobs_per_s == 500.0
    assert run.share_of_direct == 0.25
    assert abs(run.overhead_per_job_s - 0.003) < 1e-12  # (4 s - 1 s) / 1000 jobs
    assert abs(run.overhead_vs_per_worker_s - 0.002) < 1e-12
    numbers = json.loads(json.dumps(run.as_json()))  # plain JSON numbers, per worker count
    assert numbers["workers"] == 2 and numbers["e2e_jobs_per_s"] == 250.0 and numbers["dask_alone_jobs_per_s"] == 1000.0


def test_each_goal_is_judged_on_its_own_threshold() -> None:
    # 2.5 s end to end for 1000 jobs against 1 s alone: 40 % of Dask, 1.5 ms per job: both met.
    at_goal = judge([_run(2, e2e_wall_s=1.0 / MIN_SHARE_OF_DASK)])
    assert [g.met for g in at_goal] == [True, True]
    # 3.9 s: 26 % and 2.9 ms per job: only the overhead goal is met.
    share_missed = judge([_run(2, e2e_wall_s=1.0 + 1000 * (MAX_OVERHEAD_PER_JOB_S - 0.0001))])
    assert [g.met for g in share_missed] == [False, True]
    overhead_missed = judge([_run(2, e2e_wall_s=1.0 + 1000 * (MAX_OVERHEAD_PER_JOB_S + 0.0001), direct_wall_s=1.0)])
    assert [g.met for g in overhead_missed] == [False, False]


def test_growth_with_workers_needs_every_step_to_be_faster() -> None:
    growing = judge([_run(4, e2e_wall_s=2.0), _run(1, e2e_wall_s=4.0), _run(2, e2e_wall_s=3.0)])
    assert growing[-1].name == "end-to-end throughput grows with workers" and growing[-1].met
    assert growing[-1].measured == "1: 250/s → 2: 333/s → 4: 500/s"
    flat = judge([_run(1, e2e_wall_s=4.0), _run(2, e2e_wall_s=3.0), _run(4, e2e_wall_s=3.0)])
    assert not flat[-1].met
    assert all("grows" not in g.name for g in judge([_run(2, e2e_wall_s=3.0)]))  # one worker count: not judged
