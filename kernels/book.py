"""A book of European options on one underlying, priced in one launch on common random numbers.

Every path is walked once, step by step, to the longest maturity; each contract (sorted by maturity) is
paid from that same path when its maturity step is reached, so the contracts' estimates share their
random numbers (differences between contracts, e.g. a calendar spread, have small errors). Paths take
``kernels.heston``'s QE step (Andersen's scheme with martingale correction); Black-Scholes is that step
with no vol of vol (``kappa = xi = 0``, ``v = sigma^2``), where the variance stays put and the log-price
step is exact, so one path code serves both models. Each contract's control is its discounted terminal
price, a martingale of either. (The step-halving bias estimate of ``heston_option`` is not made here.)

With Greeks, each path is walked four more times with the same normals, with the initial volatility and
the step length bumped, and every contract gets the Greeks of ``kernels.heston`` (delta pathwise, gamma
likelihood ratio of the first step x pathwise, rho pathwise, vega and theta by finite differences on
common random numbers). A thread keeps every contract's running sums (5, plus 10 with Greeks) in local
memory.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np
from numba import njit, prange
from numba.core.extending import register_jitable

from kernels import estimators, heston, path_greeks
from kernels.closed_form import black_scholes
from kernels.context import KernelResult, RunContext
from kernels.cuda_reduce import block_sums_kernel
from kernels.heston_reference import HestonModel, heston_price
from kernels.launch import BlockKernel, sum_blocks
from kernels.params import MAX_BOOK_CONTRACTS, BookModel, OptionBookParams, OptionKind
from kernels.philox import normals4
from kernels.special import exp32

PATHS_PER_BLOCK: Final = 1024  # 4 paths per GPU thread
CPU_CHUNK_PATH_STEPS: Final = 2**23
GPU_CHUNK_PATH_STEPS: Final = 2**32
PRICE_SUMS: Final = 5  # y, y^2, x, x^2, xy
WIDTH: Final = PRICE_SUMS + path_greeks.WIDTH  # per contract: price sums, then (g, g^2) of five Greeks
_ZERO: Final = np.float32(0.0)


@register_jitable
def _accumulate(acc, c, y, x, greeks):  # type: ignore[no-untyped-def]
    y64 = np.float64(y)
    x64 = np.float64(x)
    acc[c, 0] += y64
    acc[c, 1] += y64 * y64
    acc[c, 2] += x64
    acc[c, 3] += x64 * x64
    acc[c, 4] += x64 * y64
    sums = path_greeks.add_greeks((0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0), greeks)
    for k in range(len(sums)):
        acc[c, PRICE_SUMS + k] += sums[k]


@register_jitable
def book_path(path, seed, last_step, spot, rate, v0, table, dt, maturity_steps, strikes, calls, control_means,  # type: ignore[no-untyped-def]
              with_greeks, vol_step, bump, acc):
    """Add one path's samples for every contract into ``acc[contract, :]``."""
    sigma0 = math.sqrt(v0)
    x0 = x1 = x2 = x3 = x4 = _ZERO
    s0 = s3 = s4 = v0
    s1 = (sigma0 + vol_step) * (sigma0 + vol_step)
    s2 = (sigma0 - vol_step) * (sigma0 - vol_step)
    weight = z1 = z2 = z3 = z4 = _ZERO
    c = 0
    for step in range(last_step):
        if step % 2 == 0:  # one generator call serves two steps: (z1, z2) now, (z3, z4) next
            z1, z2, z3, z4 = normals4(path, step // 2, seed)
            zv, z = z1, z2
        else:
            zv, z = z3, z4
        x0, s0, sd = heston.qe_step(x0, s0, zv, z, table, heston.FINE)
        if step == 0:
            weight = z / sd
        if with_greeks:
            x1, s1, _ = heston.qe_step(x1, s1, zv, z, table, heston.FINE)
            x2, s2, _ = heston.qe_step(x2, s2, zv, z, table, heston.FINE)
            x3, s3, _ = heston.qe_step(x3, s3, zv, z, table, heston.LONGER)
            x4, s4, _ = heston.qe_step(x4, s4, zv, z, table, heston.SHORTER)
        while c < maturity_steps.shape[0] and maturity_steps[c] == step + 1:
            maturity = np.float32(step + 1) * dt
            discount = exp32(-rate * maturity)
            terminal = spot * exp32(x0)
            y = discount * heston._payoff(terminal, strikes[c], calls[c])
            greeks = (_ZERO, _ZERO, _ZERO, _ZERO, _ZERO)
            if with_greeks:
                greeks = heston.lane_greeks(x0, weight, x1, x2, x3, x4, spot, strikes[c], calls[c], rate, maturity,
                                            vol_step, bump * maturity)
            _accumulate(acc, c, y, discount * terminal - control_means[c], greeks)
            c += 1


@register_jitable
def book_paths(first, count, stride, n_paths, seed, last_step, spot, rate, v0, table, dt, maturity_steps,  # type: ignore[no-untyped-def]
               strikes, calls, control_means, with_greeks, vol_step, bump, acc):
    """Add the samples of paths ``first + i * stride``, i < count, into ``acc[contract, :]`` (both devices run this)."""
    for i in range(count):
        path = first + i * stride
        if path >= n_paths:
            break
        book_path(path, seed, last_step, spot, rate, v0, table, dt, maturity_steps, strikes, calls, control_means,
                  with_greeks, vol_step, bump, acc)


@njit(parallel=True, cache=True, fastmath=True, error_model="numpy")
def _cpu_blocks(out, first_block, n_paths, seed, last_step, spot, rate, v0, table, dt, maturity_steps, strikes,  # type: ignore[no-untyped-def]
                calls, control_means, with_greeks, vol_step, bump):
    contracts = strikes.shape[0]
    for b in prange(out.shape[0]):
        acc = np.zeros((contracts, WIDTH))
        book_paths((first_block + b) * PATHS_PER_BLOCK, PATHS_PER_BLOCK, 1, n_paths, seed, last_step, spot, rate, v0,
                   table, dt, maturity_steps, strikes, calls, control_means, with_greeks, vol_step, bump, acc)
        for c in range(contracts):
            for k in range(WIDTH):
                out[b, c * WIDTH + k] = acc[c, k]


_CUDA: Final = block_sums_kernel(book_paths, width=WIDTH, items_per_block=PATHS_PER_BLOCK, rows=MAX_BOOK_CONTRACTS)


def _model(p: OptionBookParams) -> tuple[float, float, float, float, float]:
    """(v0, kappa, theta, xi, rho): Black-Scholes as a Heston model with constant variance sigma^2."""
    if p.model is BookModel.HESTON:
        return p.initial_variance, p.mean_reversion, p.long_variance, p.vol_of_vol, p.correlation
    return p.volatility**2, 0.0, p.volatility**2, 0.0, 0.0


def reference(p: OptionBookParams, strike: float, maturity: float, call: bool) -> float:
    """The contract's price by formula: Black-Scholes, or the semi-analytic Heston price."""
    if p.model is BookModel.HESTON:
        model = HestonModel(p.initial_variance, p.long_variance, p.mean_reversion, p.vol_of_vol, p.correlation)
        return heston_price(p.spot, strike, p.rate, p.dividend_yield, maturity, model, call)
    return black_scholes(p.spot, strike, p.rate, p.volatility, maturity, call, p.dividend_yield)


def run(p: OptionBookParams, device: str, ctx: RunContext) -> KernelResult:
    """Price every contract; the summary has one entry per contract, in the request's order."""
    n_paths = max(p.paths, 3)
    steps = np.asarray(p.steps(), dtype=np.int64)
    order = np.argsort(steps, kind="stable")
    contracts = [p.contracts[i] for i in order]
    dt = 1.0 / p.steps_per_year
    v0, kappa, theta, xi, rho = _model(p)
    forwards = [p.spot * math.exp(-p.dividend_yield * c.maturity) for c in contracts]
    f32 = np.float32
    table = heston.constant_table(p.rate - p.dividend_yield, kappa, theta, xi, rho, dt)
    args = (np.int64(n_paths), np.int64(p.seed), np.int64(steps.max()), f32(p.spot), f32(p.rate), f32(v0), table,
            f32(dt), steps[order],
            np.asarray([c.strike for c in contracts], dtype=np.float32),
            np.asarray([c.kind is OptionKind.CALL for c in contracts]), np.asarray(forwards, dtype=np.float32),
            bool(p.greeks), f32(heston.VOL_BUMP * math.sqrt(v0)), f32(heston.MATURITY_BUMP))
    per_block = PATHS_PER_BLOCK * int(steps.max()) * (heston.GREEK_PASSES if p.greeks else 1)
    kernel = BlockKernel(width=WIDTH * len(contracts), cpu=_cpu_blocks, cuda_factory=_CUDA,
                         cpu_chunk_blocks=max(1, CPU_CHUNK_PATH_STEPS // per_block),
                         gpu_chunk_blocks=max(1, GPU_CHUNK_PATH_STEPS // per_block))
    sums = sum_blocks(kernel, -(-n_paths // PATHS_PER_BLOCK), args, device, ctx).reshape(len(contracts), WIDTH)
    results: list[dict[str, Any]] = [{}] * len(contracts)
    for row, index in enumerate(order):
        contract = contracts[row]
        estimate = estimators.from_sums(sums[row, :PRICE_SUMS], n_paths, control_variate=p.control_variate,
                                        confidence=p.confidence, control_scale=2.0 * forwards[row])
        entry: dict[str, Any] = {**contract.model_dump(mode="json"), **estimate.as_dict(),
                                 "reference": reference(p, contract.strike, contract.maturity,
                                                        contract.kind is OptionKind.CALL)}
        if p.greeks:
            entry["greeks"] = path_greeks.summarise(sums[row, PRICE_SUMS:], n_paths, p.greeks, p.confidence,
                                                    heston.METHOD, heston.BUMP_ERRORS)
        results[int(index)] = entry
    summary = {"contracts": results, "paths": n_paths, "model": p.model.value, "steps": int(steps.max()),
               "path_steps": n_paths * int(steps.max()), "reference": _reference_name(p)}
    return KernelResult(summary=summary, paths=n_paths)


def _reference_name(p: OptionBookParams) -> str:
    return "semi-analytic Heston" if p.model is BookModel.HESTON else "Black-Scholes-Merton"
