"""The CUDA kernels, interpreted by numba's simulator, against the CPU twins for the same seed.

Tiny sizes only: the simulator runs about 1e4 paths/s. Per-path math is float32 on both sides (the
simulator evaluates some of it in double), so summaries agree to float32 rounding, not bit for bit.

What a case costs is mostly its launches' blocks, not its paths: the simulator runs a block's 256 threads as
Python threads, and a block-sum reduction makes them meet ten times, some 0.4 CPU-s a block however few of
its threads have paths (measured). A case takes the blocks and launches its purpose needs, no more.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.kernels.child import REPO, child_env
from tests.kernels.job_input import run_raw

GREEKS = ["delta", "gamma", "vega", "rho", "theta"]
CASES = [
    ("european_option", {"paths": 400, "seed": 3, "kind": "put", "antithetic": False}, None),
    ("asian_option", {"paths": 4_100, "steps": 2, "seed": 3}, None),
    ("asian_option", {"paths": 4_100, "steps": 2, "seed": 3}, 1),  # two launches of one block each
    # one path past a block of 256 (random_walk.PATHS_PER_BLOCK): path 256 jumps by the table's top row (2^8), and
    # each path's jump costs a 64-step loop per set bit of its index, interpreted: 300 paths had 15% more of them
    ("random_walk", {"paths": 257, "steps": 3, "seed": 3}, None),
    ("random_walk", {"paths": 257, "steps": 3, "seed": 3}, 1),
    ("portfolio_var", {"exposures": [1.0, 2.0], "volatilities": [0.2, 0.3], "correlation": [[1, 0.4], [0.4, 1]],
                       "paths": 301, "revaluation": "full", "seed": 3}, None),
    # a job with Greeks prices first as the same job without them does (european.run, lsm.run: the same
    # kernel on the same arguments, then the Greeks' own pass), so the antithetic call's price and the GBM
    # American's are compared here, not in cases of their own that would only repeat those launches
    ("european_option", {"paths": 301, "seed": 3, "greeks": GREEKS}, None),
    ("asian_option", {"paths": 150, "steps": 3, "seed": 3, "kind": "put", "greeks": GREEKS}, None),
    ("heston_option", {"paths": 151, "steps": 3, "seed": 3, "greeks": GREEKS}, None),
    # an even step count walks the coarse twin; Feller strongly violated reaches QE's exponential branch
    ("heston_option", {"paths": 101, "steps": 4, "seed": 3, "initial_variance": 0.04, "long_variance": 0.04,
                       "mean_reversion": 0.5, "vol_of_vol": 1.0, "correlation": -0.9, "greeks": ["gamma"]}, None),
    ("basket_option", {"spots": [100, 90], "weights": [1, 1], "volatilities": [0.2, 0.3], "strike": 190,
                       "correlation": [[1, 0.5], [0.5, 1]], "steps": 2, "paths": 101, "seed": 3}, None),
    ("basket_option", {"spots": [100, 90], "weights": [1, 1], "volatilities": [0.2, 0.3], "strike": 190,
                       "paths": 101, "seed": 3, "greeks": ["delta", "vega", "rho"]}, None),
    # Greeks over two blocks of 256 paths (basket.PATHS_PER_BLOCK), the second of one path: one chunk, and (1) a
    # chunk per block of paths, each with a normal table of its own
    ("basket_option", {"spots": [100, 90], "weights": [1, 1], "volatilities": [0.2, 0.3], "strike": 190,
                       "paths": 257, "seed": 3, "greeks": ["delta", "rho"]}, None),
    ("basket_option", {"spots": [100, 90], "weights": [1, 1], "volatilities": [0.2, 0.3], "strike": 190,
                       "paths": 257, "seed": 3, "greeks": ["delta", "rho"]}, 1),
    ("basket_option", {"spots": [100, 95], "weights": [1, -1], "volatilities": [0.25, 0.3], "strike": 0,
                       "paths": 101, "seed": 3}, None),
    ("basket_option", {"spots": [100, 95], "weights": [0.5, 0.5], "volatilities": [0.25, 0.3], "strike": 90,
                       "payoff": "geometric", "paths": 101, "seed": 3}, None),
    ("basket_option", {"spots": [100, 90], "weights": [1, 1], "model": "heston", "steps": 3, "paths": 101, "seed": 3,
                       "strike": 190, "heston": {"initial_variance": [0.04, 0.09], "long_variance": [0.04, 0.05],
                                                 "mean_reversion": [1, 2], "vol_of_vol": [0.5, 0.3],
                                                 "correlation": [-0.7, 0.2]}}, None),
    # QE steps per asset, with the step-halving twin (even steps), the exponential branch (Feller violated)
    ("basket_option", {"spots": [100, 90], "weights": [1, 1], "model": "heston", "steps": 4, "paths": 101, "seed": 3,
                       "strike": 190, "correlation": [[1, 0.5], [0.5, 1]],
                       "heston": {"initial_variance": [0.04, 0.09], "long_variance": [0.04, 0.05],
                                  "mean_reversion": [0.5, 2], "vol_of_vol": [1.0, 0.3],
                                  "correlation": [-0.9, 0.2]}}, None),
    ("american_option", {"spots": [100], "weights": [1], "volatilities": [0.3], "kind": "put", "steps": 3,
                         "paths": 101, "regression_paths": 1_000, "basis_degree": 1, "seed": 3,
                         "greeks": ["gamma", "theta"]}, None),
    # under Heston the exercise rule also regresses on the variance, which the kernels carry and evaluate
    ("american_option", {"spots": [100], "weights": [1], "model": "heston", "kind": "put", "steps": 4,
                         "exercise_dates": 2, "paths": 101, "regression_paths": 1_000, "basis_degree": 1, "seed": 3,
                         "heston": {"initial_variance": [0.04], "long_variance": [0.05], "mean_reversion": [1.5],
                                    "vol_of_vol": [0.5], "correlation": [-0.7]}, "greeks": ["delta"]}, None),
    # antithetic pairs, with the step-halving twin of both walks
    ("american_option", {"spots": [100], "weights": [1], "model": "heston", "kind": "put", "steps": 4,
                         "exercise_dates": 2, "paths": 101, "regression_paths": 1_000, "basis_degree": 1, "seed": 3,
                         "antithetic": True,
                         "heston": {"initial_variance": [0.04], "long_variance": [0.04], "mean_reversion": [0.5],
                                    "vol_of_vol": [1.0], "correlation": [-0.9]}}, None),
    ("option_book", {"contracts": [{"strike": 95, "maturity": 0.5}, {"strike": 100, "maturity": 0.25, "kind": "put"}],
                     "model": "heston", "steps_per_year": 8, "paths": 101, "seed": 3, "greeks": GREEKS}, None),
]
COMPARED = ("estimate", "std_error", "ci_low", "ci_high")
# a VaR job's estimate is one order statistic; its CVaR and mean loss see every scenario the kernel wrote
ALSO_COMPARED = ("cvar", "mean_loss")
JOB_TYPES = sorted({job for job, _, _ in CASES})


@pytest.fixture(scope="module")
def simulations(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    """Summaries on the simulator of every case of the job types this session runs, by job type: one child
    process for them all (its start-up is seconds), however many are selected (``-k portfolio_var``: one)."""
    from kernels.random_walk import jump_table

    selected = {item.callspec.params["job_type"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")}
    cases = [case for case in CASES if case[0] in selected]
    table = tmp_path_factory.mktemp("cudasim") / "jump_table.npy"
    np.save(table, jump_table())  # host code: compiled here, not interpreted there (cudasim_runner.py)
    env = child_env(simulated=True)
    done = subprocess.run([sys.executable, "-m", "tests.kernels.cudasim_runner", json.dumps(cases), str(table)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    summaries: dict[str, list[dict]] = {job: [] for job in selected}
    for (job, _, _), summary in zip(cases, json.loads(done.stdout), strict=True):
        summaries[job].append(summary)
    return summaries


@pytest.fixture(params=JOB_TYPES)
def job_type(request: pytest.FixtureRequest) -> str:
    """One job type: each kernel's cases pass or fail on their own, and can be run alone."""
    return str(request.param)


@pytest.fixture
def simulated(job_type: str, simulations: dict[str, list[dict]]) -> tuple[list[list], list[dict]]:
    """``job_type``'s cases and their summaries on the simulator, in order."""
    return [case for case in CASES if case[0] == job_type], simulations[job_type]


@pytest.mark.slow  # a child process interprets the kernels: no server, no port
@pytest.mark.timeout(300)
def test_simulated_cuda_kernels_equal_the_cpu_twins(simulated: tuple[list[list], list[dict]]) -> None:
    cases, summaries = simulated
    for (job, params, _), sim in zip(cases, summaries, strict=True):
        assert sim["device"] == "cudasim"
        cpu = run_raw(job, params, device="cpu").summary
        assert sim["paths"] == cpu["paths"]
        for sim_part, cpu_part in zip(sim.get("contracts", [sim]), cpu.get("contracts", [cpu]), strict=True):
            for key in COMPARED + tuple(k for k in ALSO_COMPARED if k in cpu_part):
                assert sim_part[key] == pytest.approx(cpu_part[key], rel=2e-5, abs=1e-6), (job, key)
            if "estimate" in cpu_part.get("discretisation_bias", {}):
                assert sim_part["discretisation_bias"]["estimate"] == pytest.approx(
                    cpu_part["discretisation_bias"]["estimate"], rel=2e-5, abs=1e-6), job
            for name, greek in cpu_part.get("greeks", {}).items():
                # per-asset Greeks (baskets) are lists; finite-difference Greeks divide a float32 difference
                # by a small bump: looser than the prices
                sim_greek = sim_part["greeks"][name]
                pairs = zip(*([g] if isinstance(g, dict) else g for g in (sim_greek, greek)), strict=True)
                for sim_entry, cpu_entry in pairs:
                    assert sim_entry["estimate"] == pytest.approx(cpu_entry["estimate"], rel=1e-3, abs=1e-5), (
                        job, name)


@pytest.mark.slow  # a child process interprets the kernels: no server, no port
@pytest.mark.timeout(300)
def test_simulated_results_do_not_depend_on_the_launch_grid(simulated: tuple[list[list], list[dict]]) -> None:
    cases, summaries = simulated
    by_case: dict[str, list[dict]] = {json.dumps(case[:2]): [] for case in cases}
    for case, sim in zip(cases, summaries, strict=True):
        by_case[json.dumps(case[:2])].append(sim)
    for runs in by_case.values():
        for other in runs[1:]:
            assert {k: other.get(k) for k in COMPARED} == {k: runs[0].get(k) for k in COMPARED}
