"""Portfolio VaR and CVaR from correlated normal log-return shocks over the horizon.

Scenario ``s`` draws one standard normal per asset (counter = (scenario group, asset)) and correlates
them with the Cholesky factor ``L`` of the correlation matrix: ``x = L z``; asset ``a``'s shock is
``vol_a * sqrt(horizon / 252) * x_a`` (horizons are trading days). Linear (delta-normal) revaluation loses
``-sum_a e_a shock_a`` (computed as ``-sum_b c_b z_b`` with ``c = L^T (e * scale)``, no matrix product per
scenario); full revaluation reprices every position along a lognormal price with no drift,
``-sum_a e_a (exp(shock_a - scale_a^2 / 2) - 1)``: the ``-scale^2/2`` correction makes each price a
martingale, so the expected P&L is zero under both revaluations. VaR and CVaR need the whole loss
distribution, so this kernel writes one loss per scenario; chunks are copied back into one host array.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numba import float64, njit, prange
from numba.core.extending import register_jitable

from kernels.chunks import run_chunks, warm_up
from kernels.closed_form import delta_normal_var
from kernels.context import KernelResult, RunContext
from kernels.cuda_reduce import block_sums_kernel
from kernels.device import CPU
from kernels.launch import warm_key
from kernels.params import MAX_ASSETS, TRADING_DAYS_PER_YEAR, PortfolioVarParams
from kernels.philox import NORMALS_PER_DRAW, normals4
from kernels.risk import HISTOGRAM_BINS, LossSummary, summarise, summarise_tail, tail_size

GROUPS_PER_BLOCK: Final = 1024  # 4 groups (16 scenarios) per GPU thread
SCENARIOS_PER_BLOCK: Final = GROUPS_PER_BLOCK * NORMALS_PER_DRAW
CPU_CHUNK_DRAWS: Final = 2**22  # scenarios x assets per chunk
GPU_CHUNK_DRAWS: Final = 2**31
# Half-width of a sharded job's histogram in delta-normal standard deviations: a 99.9% full-revaluation
# loss of a volatile book stays well inside it, and a bin is still 0.08 deviations wide.
HISTOGRAM_SIGMAS: Final = 8.0


@register_jitable
def scenario_losses(group, seed, n_assets, chol, scale, drift, exposures, coeffs, full, z):  # type: ignore[no-untyped-def]
    """Losses of the four scenarios of ``group``; ``z`` is (4, >= n_assets) scratch for full revaluation."""
    l0 = l1 = l2 = l3 = 0.0
    for b in range(n_assets):
        z0, z1, z2, z3 = normals4(group, b, seed)
        if full:
            z[0, b] = z0
            z[1, b] = z1
            z[2, b] = z2
            z[3, b] = z3
        else:
            l0 -= coeffs[b] * z0
            l1 -= coeffs[b] * z1
            l2 -= coeffs[b] * z2
            l3 -= coeffs[b] * z3
    if full:
        for a in range(n_assets):
            x0 = x1 = x2 = x3 = 0.0
            for b in range(a + 1):
                x0 += chol[a, b] * z[0, b]
                x1 += chol[a, b] * z[1, b]
                x2 += chol[a, b] * z[2, b]
                x3 += chol[a, b] * z[3, b]
            l0 -= exposures[a] * (math.exp(scale[a] * x0 + drift[a]) - 1.0)
            l1 -= exposures[a] * (math.exp(scale[a] * x1 + drift[a]) - 1.0)
            l2 -= exposures[a] * (math.exp(scale[a] * x2 + drift[a]) - 1.0)
            l3 -= exposures[a] * (math.exp(scale[a] * x3 + drift[a]) - 1.0)
    return l0, l1, l2, l3


@register_jitable
def _store(losses, first_group, group, values, n_scenarios):  # type: ignore[no-untyped-def]
    """Write a group's losses into the chunk's array, skipping scenarios past the end."""
    base = group * NORMALS_PER_DRAW
    offset = (group - first_group) * NORMALS_PER_DRAW
    for lane in range(NORMALS_PER_DRAW):
        if base + lane < n_scenarios:
            losses[offset + lane] = values[lane]


@register_jitable
def group_losses(first_group, n_groups, stride, n_scenarios, seed, chol, scale, drift, exposures, coeffs,  # type: ignore[no-untyped-def]
                 full, z, losses, chunk_first_group):
    """Write the losses of groups ``first_group + i * stride``, i < n_groups, into the chunk's ``losses``.

    ``losses[0]`` is the first scenario of group ``chunk_first_group``; ``z`` is ``scenario_losses``' scratch.
    One GPU thread's work (``kernels.cuda_reduce``'s storing variant), and a CPU block's with stride 1.
    """
    for i in range(n_groups):
        group = first_group + i * stride
        if group * NORMALS_PER_DRAW >= n_scenarios:
            break
        values = scenario_losses(group, seed, exposures.shape[0], chol, scale, drift, exposures, coeffs, full, z)
        _store(losses, chunk_first_group, group, values, n_scenarios)


@njit(parallel=True, cache=True)
def _cpu_chunk(losses, first_block, n_blocks, n_scenarios, seed, chol, scale, drift, exposures,  # type: ignore[no-untyped-def]
               coeffs, full):
    first_group = first_block * GROUPS_PER_BLOCK
    for b in prange(n_blocks):
        z = np.empty((NORMALS_PER_DRAW, exposures.shape[0]))
        group_losses(first_group + b * GROUPS_PER_BLOCK, GROUPS_PER_BLOCK, 1, n_scenarios, seed, chol, scale, drift,
                     exposures, coeffs, full, z, losses, first_group)


# no fastmath, as the CPU twin has none: the two must give the same losses
_CUDA: Final = block_sums_kernel(group_losses, width=1, items_per_block=GROUPS_PER_BLOCK,
                                 scratch=(NORMALS_PER_DRAW, MAX_ASSETS), scratch_dtype=float64, stores=True,
                                 fastmath=False)


class _Model:
    """Host-side inputs of the kernel, derived once from the params."""

    def __init__(self, p: PortfolioVarParams) -> None:
        n = len(p.exposures)
        correlation = np.asarray(p.correlation, dtype=np.float64) if p.correlation is not None else np.eye(n)
        self.exposures = np.asarray(p.exposures, dtype=np.float64)
        self.scale = np.asarray(p.volatilities, dtype=np.float64) * math.sqrt(p.horizon_days / TRADING_DAYS_PER_YEAR)
        self.drift = -0.5 * self.scale**2  # log-return drift that makes exp(shock) a martingale
        self.chol = np.linalg.cholesky(correlation)
        self.coeffs = self.chol.T @ (self.exposures * self.scale)
        self.covariance = np.outer(self.scale, self.scale) * correlation
        self.full = p.revaluation == "full"


def block_count(p: PortfolioVarParams) -> int:
    """Blocks of ``SCENARIOS_PER_BLOCK`` scenarios the job takes (the unit a shard is made of)."""
    return -(-p.paths // SCENARIOS_PER_BLOCK)


def simulate_losses(p: PortfolioVarParams, model: _Model, device: str, ctx: RunContext, first: int = 0,
                    count: int | None = None, on_device: bool = False) -> Any:
    """One loss per scenario, scenario order, on ``device``: every scenario's, or blocks ``first .. first + count``.

    With ``on_device`` a GPU job's losses stay there as one cupy array (``risk.summarise`` reads them there);
    otherwise, and in the simulator, they come back as a NumPy array.
    """
    n = p.paths
    n_blocks = block_count(p) - first if count is None else count
    offset = first * SCENARIOS_PER_BLOCK
    losses = np.empty(max(0, min(n_blocks * SCENARIOS_PER_BLOCK, n - offset)), dtype=np.float64)
    draws_per_block = SCENARIOS_PER_BLOCK * len(p.exposures)
    args = (np.int64(n), np.int64(p.seed), model.chol, model.scale, model.drift, model.exposures, model.coeffs,
            model.full)

    # run_chunks counts blocks from 0: block ``start`` of this range is the job's block ``first + start``
    def keep(start: int, chunk: np.ndarray) -> None:
        at = start * SCENARIOS_PER_BLOCK
        losses[at:at + chunk.size] = chunk

    def chunk_len(start: int, count: int) -> int:
        return min(count * SCENARIOS_PER_BLOCK, n - offset - start * SCENARIOS_PER_BLOCK)

    if device == CPU:

        def compute_cpu(start: int, count: int) -> None:
            chunk = np.empty(chunk_len(start, count))
            _cpu_chunk(chunk, np.int64(first + start), np.int64(count), *args)
            keep(start, chunk)

        warm_up(compute_cpu, ctx, warm_key(_cpu_chunk, device, args))
        run_chunks(n_blocks, max(1, CPU_CHUNK_DRAWS // draws_per_block), compute_cpu, ctx)
        return losses

    from kernels import gpu

    launch = _CUDA()
    device_args = gpu.to_device_all(args)

    resident = gpu.empty(losses.shape) if on_device and gpu.pooled() else None

    def compute_gpu(start: int, count: int) -> None:
        if resident is not None:  # the chunk's own slice of the losses, written in place
            at = start * SCENARIOS_PER_BLOCK
            launch[count, gpu.THREADS](resident[at:at + chunk_len(start, count)], np.int64(first + start), device_args)
            return
        chunk = gpu.empty((chunk_len(start, count),))
        launch[count, gpu.THREADS](chunk, np.int64(first + start), device_args)
        keep(start, gpu.to_host(chunk))

    chunk_blocks = gpu.budget_blocks(SCENARIOS_PER_BLOCK * 8, max(1, GPU_CHUNK_DRAWS // draws_per_block))
    try:
        warm_up(compute_gpu, ctx, warm_key(launch, device, args))
        run_chunks(n_blocks, chunk_blocks, compute_gpu, ctx, on_oom=gpu.release)
    finally:
        gpu.release()
    return losses if resident is None else resident


@dataclass(frozen=True)
class LossTail:
    """What one shard of a VaR job hands back: enough for the job's exact VaR and CVaR, and its histogram."""

    tail: np.ndarray  # the shard's largest ``risk.tail_size(job's scenarios)`` losses, ascending
    scenarios: int
    loss_sum: float
    counts: np.ndarray  # histogram counts on ``histogram_edges``


def histogram_edges(p: PortfolioVarParams) -> np.ndarray:
    """Fixed edges of a sharded job's loss histogram: ``HISTOGRAM_SIGMAS`` delta-normal deviations each side.

    Every shard counts on the same edges, so the counts add up exactly; losses beyond them count in the end bins.
    """
    model = _Model(p)
    spread = HISTOGRAM_SIGMAS * math.sqrt(float(model.exposures @ model.covariance @ model.exposures))
    return np.linspace(-spread, spread, HISTOGRAM_BINS + 1)


def shard_part(p: PortfolioVarParams, device: str, ctx: RunContext, first: int, count: int) -> LossTail:
    """One shard's part of the job: blocks ``first .. first + count`` simulated and reduced to a ``LossTail``."""
    losses = simulate_losses(p, _Model(p), device, ctx, first, count) if count else np.empty(0)
    keep = min(losses.size, tail_size(p.paths, p.confidence, p.interval_confidence))
    tail = np.sort(np.partition(losses, losses.size - keep)[losses.size - keep:]) if keep else losses[:0]
    edges = histogram_edges(p)
    counts, _ = np.histogram(np.clip(losses, edges[0], edges[-1]), bins=edges)
    return LossTail(tail, losses.size, float(losses.sum()), counts)


def merge_parts(p: PortfolioVarParams, parts: Sequence[LossTail]) -> KernelResult:
    """The job's result from every shard's ``LossTail``: VaR and CVaR exactly as ``run`` gives them."""
    scenarios = sum(part.scenarios for part in parts)
    if scenarios != p.paths:
        raise ValueError(f"the shards hold {scenarios} scenarios, the job {p.paths}")
    keep = tail_size(p.paths, p.confidence, p.interval_confidence)
    tail = np.sort(np.concatenate([part.tail for part in parts]))[-keep:]
    counts = np.sum([part.counts for part in parts], axis=0)
    loss_sum = math.fsum(part.loss_sum for part in parts)
    return _result(p, summarise_tail(tail, p.paths, loss_sum, histogram_edges(p), counts, p.confidence,
                                     p.interval_confidence))


def run(p: PortfolioVarParams, device: str, ctx: RunContext) -> KernelResult:
    """VaR and CVaR at ``p.confidence``; the summary's ``estimate`` is the VaR."""
    losses = simulate_losses(p, _Model(p), device, ctx, on_device=True)
    summary = summarise(losses, p.confidence, p.interval_confidence)
    if device != CPU:  # the losses and the summary's device arrays go back to the driver, as every GPU job's do
        from kernels import gpu

        del losses
        gpu.release()
    return _result(p, summary)


def _result(p: PortfolioVarParams, result: LossSummary) -> KernelResult:
    model = _Model(p)
    var, cvar = result.var, result.cvar
    reference = delta_normal_var(model.exposures, model.covariance, p.confidence)
    summary = {
        **var.as_dict(), "paths": p.paths, "var_confidence": p.confidence, "revaluation": p.revaluation,
        "var": var.estimate, "var_std_error": var.std_error, "var_ci": [var.ci_low, var.ci_high],
        "cvar": cvar.estimate, "cvar_std_error": cvar.std_error, "cvar_ci": [cvar.ci_low, cvar.ci_high],
        "mean_loss": result.mean_loss, "horizon_trading_days": p.horizon_days,
        # exact for linear revaluation; an approximation of the full revaluation's VaR/CVaR
        "delta_normal_var": reference.var, "delta_normal_cvar": reference.cvar,
    }
    return KernelResult(summary=summary, paths=p.paths, artifacts=result.artifacts)
