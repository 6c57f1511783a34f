"""Greeks of basket and Longstaff-Schwartz options by central finite differences on common random numbers.

Every revaluation (base, and each parameter bumped up and down) walks the *same* pricing paths (same
seed, same counters) and, for ``american_option``, follows the *same* exercise rule, fitted once on the
base regression paths. The rule is a function of the basket value (and, under Heston, of the weight-
averaged variance) only (``kernels.lsm``), so it is the same rule whatever the initial spots or
variances: the bumped valuations price the same policy, and the optimal policy in state space does not
depend on the starting point, so delta, gamma and vega are those of that policy's value. Rate and
maturity do change the optimal policy; by the envelope theorem (the rule is optimal at the base) a first
derivative of the fixed-rule value equals the optimal value's, so rho and theta hold too. Re-fitting per
bump would add the regression's noise to every difference.

A kernel writes each path's discounted cash flow; the Greek of a path is the difference quotient of its
cash flows, so each Greek's standard error comes from the per-path differences (their sample variance
over ``n``). The control variate is not used for Greeks.

Per-asset Greeks (delta, gamma, vega) come back as a list, one entry per asset in ``spots`` order; gamma
is the diagonal ``d²V/dS_i²``. Bumps: spot ``S_i`` by 1% (relative), volatility by 1% (GBM: ``sigma_i``;
Heston: ``sqrt(v0_i)``), rate by 1e-3 (absolute), maturity by 1% (theta is ``-dV/dT``, per year).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Final, TypeVar

import numpy as np
from numba import cuda, njit, prange  # numba.cuda imports without a GPU; kernels compile at first launch
from numba.core.extending import register_jitable

from kernels import basket, estimators
from kernels.basket import PATHS_PER_BLOCK, SCRATCH, path_sample
from kernels.chunks import run_chunks, warm_up
from kernels.context import RunContext
from kernels.device import CPU, GPU
from kernels.launch import warm_key
from kernels.params import BasketModel, BasketOptionParams, Greek, OptionKind
from kernels.philox import NORMALS_PER_DRAW

SPOT_BUMP: Final = 0.01  # relative
VOL_BUMP: Final = 0.01  # relative, of sigma_i (GBM) or sqrt(v0_i) (Heston)
# Absolute; large enough that the float32 cash flows' rounding (about 1e-7 relative) stays far below
# the difference, small enough that the O(h^2) error of the central difference is negligible.
RATE_BUMP: Final = 1e-3
MATURITY_BUMP: Final = 0.01  # relative
PER_ASSET: Final = (Greek.DELTA, Greek.GAMMA, Greek.VEGA)
METHOD: Final = "central finite difference, common random numbers"
METHODS: Final = {
    Greek.DELTA: f"{METHOD} (spot +-{SPOT_BUMP:.0%})",
    Greek.GAMMA: f"{METHOD} (spot +-{SPOT_BUMP:.0%}, second difference)",
    Greek.VEGA: f"{METHOD} (volatility +-{VOL_BUMP:.0%})",
    Greek.RHO: f"{METHOD} (rate +-{RATE_BUMP:g})",
    Greek.THETA: f"{METHOD} (maturity +-{MATURITY_BUMP:.0%})",
}
CPU_CHUNK_ASSET_STEPS: Final = 2**23
GPU_CHUNK_ASSET_STEPS: Final = 2**32

P = TypeVar("P", bound=BasketOptionParams)
Value = TypeVar("Value", float, np.ndarray)


@dataclass(frozen=True)
class Bump:
    """One revaluation: what is bumped (``spot``, ``vol``, ``rate``, ``maturity`` or ``base``), which asset,
    which way (+1, -1; 0 for the base), and the bumped params."""

    what: str
    asset: int
    sign: int
    params: BasketOptionParams

    @property
    def key(self) -> tuple[str, int, int]:
        """``(what, asset, sign)``, the key of this revaluation's value."""
        return self.what, self.asset, self.sign


def _vol_bumped(p: P, i: int, sign: int) -> P:
    factor = 1 + sign * VOL_BUMP
    if p.model is BasketModel.HESTON:
        assert p.heston is not None  # validated by BasketOptionParams
        variances = list(p.heston.initial_variance)
        variances[i] *= factor**2
        return p.model_copy(update={"heston": p.heston.model_copy(update={"initial_variance": variances})})
    assert p.volatilities is not None  # validated for GBM
    vols = list(p.volatilities)
    vols[i] *= factor
    return p.model_copy(update={"volatilities": vols})


def bumped_cases(p: P, requested: list[Greek]) -> list[Bump]:
    """The base valuation and every bumped one the ``requested`` Greeks need."""
    cases = [Bump("base", 0, 0, p)]
    for sign in (1, -1):
        for i in range(len(p.spots)):
            if Greek.DELTA in requested or Greek.GAMMA in requested:
                spots = list(p.spots)
                spots[i] *= 1 + sign * SPOT_BUMP
                cases.append(Bump("spot", i, sign, p.model_copy(update={"spots": spots})))
            if Greek.VEGA in requested:
                cases.append(Bump("vol", i, sign, _vol_bumped(p, i, sign)))
        if Greek.RHO in requested:
            cases.append(Bump("rate", 0, sign, p.model_copy(update={"rate": p.rate + sign * RATE_BUMP})))
        if Greek.THETA in requested:
            cases.append(Bump("maturity", 0, sign,
                              p.model_copy(update={"maturity": p.maturity * (1 + sign * MATURITY_BUMP)})))
    return cases


def _vol(p: BasketOptionParams, i: int) -> float:
    if p.model is BasketModel.HESTON:
        assert p.heston is not None
        return math.sqrt(p.heston.initial_variance[i])
    assert p.volatilities is not None
    return p.volatilities[i]


def differences(values: Mapping[tuple[str, int, int], Value], p: BasketOptionParams,
                requested: list[Greek]) -> dict[Greek, list[Value]]:
    """The ``requested`` Greeks from the revaluations' values (prices, or per-path cash flows: arrays work
    element by element). Per-asset Greeks get one entry per asset, rho and theta one entry."""
    base = values[("base", 0, 0)]
    out: dict[Greek, list[Value]] = {}
    for greek in requested:
        if greek in PER_ASSET:
            out[greek] = []
            for i in range(len(p.spots)):
                if greek is Greek.VEGA:
                    step = _vol(p, i) * VOL_BUMP
                    out[greek].append((values[("vol", i, 1)] - values[("vol", i, -1)]) / (2 * step))
                    continue
                up, down, step = values[("spot", i, 1)], values[("spot", i, -1)], p.spots[i] * SPOT_BUMP
                out[greek].append((up - down) / (2 * step) if greek is Greek.DELTA
                                  else (up - 2 * base + down) / step**2)
        elif greek is Greek.RHO:
            out[greek] = [(values[("rate", 0, 1)] - values[("rate", 0, -1)]) / (2 * RATE_BUMP)]
        else:
            step = p.maturity * MATURITY_BUMP
            out[greek] = [-(values[("maturity", 0, 1)] - values[("maturity", 0, -1)]) / (2 * step)]
    return out


def flat(greeks: Mapping[Greek, list[Any]]) -> dict[str, Any]:
    """``delta_0``, ``delta_1``, ..., ``rho``, ``theta``: the Greeks under one name each."""
    out: dict[str, Any] = {}
    for greek, entries in greeks.items():
        if greek in PER_ASSET:
            out.update({f"{greek.value}_{i}": v for i, v in enumerate(entries)})
        else:
            out[greek.value] = entries[0]
    return out


@register_jitable
def _cash_flow(case, path, seed, n, mode, chols, assets, dts, steps, draws, every, strike, call, rates, coeffs,  # type: ignore[no-untyped-def]
               log_geometrics, total_weights, control_means, scratch, table):
    """Case ``case``'s cash flow on pricing path ``path`` (with a ``table``, the path's column there)."""
    return path_sample(path, seed, n, mode, chols[case], assets[case], dts[case], steps, draws, every, strike, call,
                       rates[case], coeffs, log_geometrics[case], total_weights[case], control_means[case], scratch,
                       table)


@njit(parallel=True, cache=True, fastmath=True, error_model="numpy")
def _cpu_case_cash_flows(out, first_path, seed, n, mode, chols, assets, dts, steps, draws, every, strike, call,  # type: ignore[no-untyped-def]
                         rates, coeffs, log_geometrics, total_weights, control_means):
    """``out[case, k]``: case ``case``'s cash flow on path ``first_path + k``, the path's normals drawn as it
    walks (on a CPU core, drawing them is about as cheap as reading them back)."""
    cases, count = out.shape
    for row in prange(cases * count):
        case = row // count
        k = row - case * count
        out[case, k] = _cash_flow(case, first_path + k, seed, n, mode, chols, assets, dts, steps, draws, every, strike,
                                  call, rates, coeffs, log_geometrics, total_weights, control_means,
                                  np.empty(SCRATCH, dtype=np.float32), None)


@cache
def _cuda_case_cash_flows() -> Any:
    from numba import float32

    @cuda.jit(fastmath=True)
    def kernel(out, table, seed, n, mode, chols, assets, dts, steps, draws, every, strike, call, rates, coeffs,  # type: ignore[no-untyped-def]
               log_geometrics, total_weights, control_means):
        # out[case, k] on the chunk's path k, whose normals are column k of ``table``: a warp is 32 paths of
        # one case, so each of its reads of the table is one contiguous row segment
        i = cuda.grid(1)
        count = out.shape[1]
        if i < out.shape[0] * count:
            case = i // count
            k = i - case * count
            out[case, k] = _cash_flow(case, k, seed, n, mode, chols, assets, dts, steps, draws, every, strike, call,
                                      rates, coeffs, log_geometrics, total_weights, control_means,
                                      cuda.local.array(SCRATCH, float32), table)

    return kernel


def case_cash_flows(cases: list[Bump], coeffs: np.ndarray, every: int, n_paths: int, device: str,
                    ctx: RunContext) -> np.ndarray:
    """Each revaluation's discounted cash flow (float32) on each pricing path under the exercise rule
    ``coeffs``: one row per case, one column per path.

    Chunks of paths run every case in one launch, not one launch per case: a revaluation alone is a few
    hundred blocks, too few to fill a GPU whose threads each walk hundreds of latency-bound steps. The
    cases walk the same paths (common random numbers), so on a GPU each chunk's normals are generated once,
    into a table every case reads (``basket.normal_table``), instead of once per case.
    """
    models = [basket.Model.of(case.params) for case in cases]
    shared = {(m.n, m.mode, m.draws) for m in models}
    assert len(shared) == 1, f"revaluations differ in shape: {shared}"  # bumps move values, never shapes
    base = cases[0].params
    n, mode, draws = shared.pop()

    def stacked(values: list[Any]) -> np.ndarray:
        return np.ascontiguousarray(np.stack([np.asarray(v, dtype=np.float32) for v in values]))

    args = (np.int64(base.seed), np.int64(n), np.int64(mode), stacked([m.chol for m in models]),
            stacked([m.assets for m in models]), stacked([m.dt for m in models]), np.int64(base.steps),
            np.int64(draws), np.int64(every), np.float32(base.strike), base.kind is OptionKind.CALL,
            stacked([case.params.rate for case in cases]), coeffs, stacked([m.log_geometric for m in models]),
            stacked([m.total_weight for m in models]), stacked([m.control_mean for m in models]))
    out = np.empty((len(cases), n_paths), dtype=np.float32)
    n_blocks = -(-n_paths // PATHS_PER_BLOCK)
    per_block = PATHS_PER_BLOCK * len(cases) * n * base.steps  # asset steps a block of paths walks

    def paths(start: int, count: int) -> tuple[int, int]:
        first = start * PATHS_PER_BLOCK
        return first, min(count * PATHS_PER_BLOCK, n_paths - first)

    if device == CPU:
        def compute_cpu(start: int, count: int) -> None:
            # Into a chunk of its own, then copied into place, as on the GPU: a column slice of ``out`` is
            # contiguous only when it is all of it (a one-chunk job, as the warm-up's and the image build's),
            # and numba compiles the kernel again for each array layout it is handed: a worker's first
            # job of more than one chunk paid that compile (some 12 CPU-seconds) after its warm-up.
            first, size = paths(start, count)
            chunk = np.empty((len(cases), size), dtype=np.float32)
            _cpu_case_cash_flows(chunk, np.int64(first), *args)
            out[:, first:first + size] = chunk

        warm_up(compute_cpu, ctx, warm_key(_cpu_case_cash_flows, CPU, args))
        run_chunks(n_blocks, max(1, CPU_CHUNK_ASSET_STEPS // per_block), compute_cpu, ctx)
        return out

    from kernels import gpu

    launch = _cuda_case_cash_flows()
    device_args = gpu.to_device_all(args)
    normals = base.steps * draws  # a revaluation never takes the Heston bias estimate's double steps

    def compute_gpu(start: int, count: int) -> None:
        first, size = paths(start, count)
        table = basket.normal_table(base.seed, first, size, normals)
        chunk = gpu.empty((len(cases), size), np.float32)
        launch[-(-(len(cases) * size) // gpu.THREADS), gpu.THREADS](chunk, table, *device_args)
        out[:, first:first + size] = gpu.to_host(chunk)

    table_row = -(-normals // NORMALS_PER_DRAW) * NORMALS_PER_DRAW
    budget = gpu.budget_blocks(PATHS_PER_BLOCK * 4 * (len(cases) + table_row),
                               max(1, GPU_CHUNK_ASSET_STEPS // per_block))
    try:
        warm_up(compute_gpu, ctx, warm_key(launch, GPU, args))
        run_chunks(n_blocks, budget, compute_gpu, ctx, on_oom=gpu.release)
    finally:
        gpu.release()
    return out


def _summary(samples: np.ndarray, greek: Greek, confidence: float, rounding: float) -> dict[str, Any]:
    n = samples.size
    std_error = float(np.std(samples, ddof=1)) / math.sqrt(n)
    return {**estimators.interval(float(np.mean(samples)), std_error, n, confidence, rounding).as_dict(),
            "method": METHODS[greek]}


def rounding_bounds(values: Mapping[tuple[str, int, int], np.ndarray], p: BasketOptionParams,
                    requested: list[Greek]) -> dict[Greek, list[float]]:
    """Float32 rounding bound of each Greek of ``differences``, for its interval.

    A Greek is a linear combination ``sum c_k V_k`` of the revaluations' mean cash flows, each of which
    carries a float32 error up to ``FLOAT32_SAMPLE_ERROR |V_k|`` (``estimators``): the bound is
    ``FLOAT32_SAMPLE_ERROR sum |c_k| mean|V_k|`` (the ``c_k`` read off ``differences`` itself, which is
    linear), plus the bumped inputs' rounding (``estimators.bump_rounding``) times the Greek.
    """
    sizes = {key: float(np.mean(np.abs(v))) for key, v in values.items()}
    greeks = differences({key: float(np.mean(v)) for key, v in values.items()}, p, requested)
    bounds = {greek: [0.0] * len(entries) for greek, entries in greeks.items()}
    for key, size in sizes.items():
        unit = {other: 1.0 if other == key else 0.0 for other in values}
        for greek, coefficients in differences(unit, p, requested).items():
            for i, c in enumerate(coefficients):
                bounds[greek][i] += estimators.FLOAT32_SAMPLE_ERROR * abs(c) * size
    for greek, entries in greeks.items():
        for i, value in enumerate(entries):
            bounds[greek][i] += _bump_error(greek, p) * abs(value)
    return bounds


def _bump_error(greek: Greek, p: BasketOptionParams) -> float:
    if greek is Greek.RHO:
        return estimators.bump_rounding(RATE_BUMP, p.rate)
    relative = {Greek.DELTA: SPOT_BUMP, Greek.GAMMA: SPOT_BUMP, Greek.VEGA: VOL_BUMP, Greek.THETA: MATURITY_BUMP}
    # gamma divides by the step squared: twice the relative error of the step
    return (2.0 if greek is Greek.GAMMA else 1.0) * estimators.bump_rounding(relative[greek])


def estimate(p: BasketOptionParams, coeffs: np.ndarray, every: int, n_paths: int, device: str,
             ctx: RunContext) -> dict[str, Any]:
    """``p.greeks`` of the option priced under the exercise rule ``coeffs``, each with its standard error.

    Per-asset Greeks are lists (one entry per asset); rho and theta single entries.
    """
    cases = bumped_cases(p, p.greeks)
    flows = case_cash_flows(cases, coeffs, every, n_paths, device, ctx)
    values = {case.key: flows[k].astype(np.float64) for k, case in enumerate(cases)}
    out: dict[str, Any] = {}
    bounds = rounding_bounds(values, p, p.greeks)
    for greek, entries in differences(values, p, p.greeks).items():
        summaries = [_summary(samples, greek, p.confidence, bound)
                     for samples, bound in zip(entries, bounds[greek], strict=True)]
        out[greek.value] = summaries if greek in PER_ASSET else summaries[0]
    return out
