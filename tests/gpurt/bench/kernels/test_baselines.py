"""The NumPy baselines compute the same estimators as the kernels (else speed-ups would mean nothing)."""

from __future__ import annotations

import math

import numpy as np

from gpurt.bench.kernels import baselines
from kernels import estimators
from kernels.closed_form import black_scholes
from kernels.params import AsianOptionParams, EuropeanOptionParams, PortfolioVarParams, RandomWalkParams
from tests.kernels.job_input import run_raw


def test_european_baseline_prices_the_option() -> None:
    p = EuropeanOptionParams(paths=400_000, seed=3)
    estimate = estimators.from_sums(baselines.european(np, p), p.paths // 2, control_variate=True)
    assert abs(estimate.estimate - black_scholes(100, 100, 0.05, 0.2, 1.0)) < 3.5 * estimate.std_error


def test_asian_baseline_agrees_with_the_kernel() -> None:
    p = AsianOptionParams(paths=50_000, steps=16, seed=3)
    base = estimators.from_sums(baselines.asian(np, p), p.paths, control_variate=True)
    kernel = run_raw("asian_option", p, device="cpu").summary
    assert abs(base.estimate - kernel["estimate"]) < 3.5 * math.hypot(base.std_error, kernel["std_error"])


def test_random_walk_baseline_has_the_same_spread() -> None:
    p = RandomWalkParams(paths=20_000, steps=25, seed=3)
    total, total_sq = baselines.random_walk(np, p)
    spread = math.sqrt(total_sq / p.paths - (total / p.paths) ** 2)
    expected = 1 / math.sqrt(p.steps)
    assert abs(spread - expected) < 4 * expected / math.sqrt(2 * p.paths)


def test_portfolio_baseline_matches_the_parametric_var() -> None:
    p = PortfolioVarParams(exposures=[1e6, 2e6], volatilities=[0.2, 0.1], correlation=[[1, 0.3], [0.3, 1]],
                           paths=200_000, seed=3)
    summary = baselines.portfolio_var(np, p)
    reference = run_raw("portfolio_var", p, device="cpu").summary["delta_normal_var"]
    assert abs(summary.var.estimate - reference) < 3.5 * summary.var.std_error


def test_baseline_qe_step_is_the_kernels_step() -> None:
    """The vectorised QE step of the basket baseline takes the kernels' step (``heston.qe_move``) in both
    branches (psi above and below 1.5), martingale correction included."""
    from kernels import heston

    rng = np.random.default_rng(7)
    constants = heston.step_constants(0.02, 0.5, 0.04, 1.0, -0.9, 1 / 24)
    v = np.concatenate([rng.uniform(0.0, 0.01, 200), rng.uniform(0.02, 0.3, 200)])  # small v: psi > 1.5
    zv, z = rng.standard_normal(v.size), rng.standard_normal(v.size)
    x, v_next = baselines._qe_step(np, np.zeros(v.size), v, zv, z, np.asarray(constants))
    f32 = np.float32
    table = [f32(c) for c in constants]
    kernel = np.array([heston.qe_move(f32(0.0), f32(a), f32(b), f32(c), *table)[:2]
                       for a, b, c in zip(v, zv, z, strict=True)])
    psi = (v * constants[2] + constants[3]) / (constants[4] + (v - constants[4]) * constants[1]) ** 2
    assert (psi > heston.PSI_CRITICAL).sum() > 50 and (psi <= heston.PSI_CRITICAL).sum() > 50
    np.testing.assert_allclose(v_next, kernel[:, 1], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(x, kernel[:, 0], rtol=1e-4, atol=1e-5)
