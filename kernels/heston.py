"""European call/put under the Heston stochastic-volatility model: full-truncation Euler, price control.

Each path takes ``steps`` Euler steps of the log-price ``x`` and the variance ``v`` (Lord, Koekkoek and van
Dijk 2010, "full truncation": only ``v+ = max(v, 0)`` enters the coefficients):

    x += (r - q - v+/2) dt + sqrt(v+ dt) z1
    v += kappa (theta - v+) dt + xi sqrt(v+ dt) (rho z1 + sqrt(1 - rho^2) z2)

Its weak bias falls as ``1/steps`` (``gpurt bench accuracy`` reports it against the semi-analytic price).
Because ``E[exp(-v+ dt/2 + sqrt(v+ dt) z1)] = 1`` at every step, the discounted simulated price is an
exact martingale, so ``e^{-rT} S_T - S_0 e^{-qT}`` is a mean-zero control variate at any step count.
One generator call gives both normals of a step for two paths (counter = (path pair, step)).

Greeks (when asked): delta pathwise, gamma likelihood ratio on the first step's two shocks (their joint
density: ``score_shock``) times the pathwise delta, rho pathwise; vega (to the initial volatility
``sqrt(v0)``) and theta by central finite differences on common random numbers: the same normals drive the
bumped paths in the same thread.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any, Final

import numpy as np
from numba import cuda, njit, prange  # numba.cuda imports without a GPU; kernels compile at first launch
from numba.core.extending import register_jitable

from kernels import estimators, path_greeks
from kernels.context import KernelResult, RunContext
from kernels.estimators import SUM_WIDTH, add_sample
from kernels.heston_reference import HestonModel, heston_price
from kernels.launch import BlockKernel, sum_blocks
from kernels.path_greeks import WIDTH as GREEK_WIDTH
from kernels.philox import normals4
from kernels.special import exp32
from protocol.params import Greek, HestonOptionParams, OptionKind

PATHS_PER_GROUP: Final = 2  # a generator call's four normals are two steps' worth of (z1, z2)
GROUPS_PER_BLOCK: Final = 1024  # 4 groups (8 paths) per GPU thread
PATHS_PER_BLOCK: Final = GROUPS_PER_BLOCK * PATHS_PER_GROUP
CPU_CHUNK_PATH_STEPS: Final = 2**23
GPU_CHUNK_PATH_STEPS: Final = 2**32
# Relative bumps of the finite-difference Greeks: small enough that the central difference's bias
# (relative ~ bump^2) is far below the standard error, large enough against float32 rounding of S_T.
VOL_BUMP: Final = 0.01
MATURITY_BUMP: Final = 0.01
GREEK_PASSES: Final = 5  # paths per sample in the Greeks kernel: base, vol up/down, maturity up/down
# Relative error of the finite-difference Greeks from the float32 rounding of the bumped inputs
# (``estimators.bump_rounding``), added to their intervals.
BUMP_ERRORS: Final = {Greek.VEGA: estimators.bump_rounding(VOL_BUMP),
                      Greek.THETA: estimators.bump_rounding(MATURITY_BUMP)}
METHOD: Final = {
    Greek.DELTA: "pathwise", Greek.GAMMA: "likelihood ratio x pathwise", Greek.RHO: "pathwise",
    Greek.VEGA: "finite difference, common random numbers (initial volatility sqrt(v0))",
    Greek.THETA: "finite difference, common random numbers",
}
_ZERO: Final = np.float32(0.0)
_ONE: Final = np.float32(1.0)
_HALF: Final = np.float32(0.5)
_TWO: Final = np.float32(2.0)


@register_jitable
def _euler(x, v, z1, z2, carry_dt, dt, mean_reversion_dt, long_term_dt, vol_of_vol, rho, rho_bar):  # type: ignore[no-untyped-def]
    """One full-truncation Euler step of the log-price ``x`` and the variance ``v`` (float32)."""
    positive = max(v, _ZERO)
    root = math.sqrt(positive * dt)
    x = x + carry_dt - _HALF * positive * dt + root * z1
    v = v + long_term_dt - mean_reversion_dt * positive + vol_of_vol * root * (rho * z1 + rho_bar * z2)
    return x, v


@register_jitable
def _walk_pair(group, seed, steps, v0, carry, dt, mean_reversion, long_variance, vol_of_vol, rho, rho_bar):  # type: ignore[no-untyped-def]
    """Terminal log-growths of the two paths of ``group`` and their first step's likelihood-ratio shocks."""
    carry_dt = carry * dt
    mean_reversion_dt = mean_reversion * dt
    long_term_dt = mean_reversion_dt * long_variance
    xa = xb = _ZERO
    va = vb = v0
    first_a = first_b = _ZERO
    for step in range(steps):
        a1, a2, b1, b2 = normals4(group, step, seed)
        if step == 0:
            first_a = score_shock(a1, a2, rho, rho_bar)
            first_b = score_shock(b1, b2, rho, rho_bar)
        xa, va = _euler(xa, va, a1, a2, carry_dt, dt, mean_reversion_dt, long_term_dt, vol_of_vol, rho, rho_bar)
        xb, vb = _euler(xb, vb, b1, b2, carry_dt, dt, mean_reversion_dt, long_term_dt, vol_of_vol, rho, rho_bar)
    return xa, xb, first_a, first_b


@register_jitable
def score_shock(z1, z2, rho, rho_bar):  # type: ignore[no-untyped-def]
    """``z1 - rho / sqrt(1 - rho^2) z2``: the first step's shocks as they enter the spot's likelihood ratio.

    The first step moves the log-price by ``sqrt(v0 dt) z1`` and the variance by a shock
    ``rho z1 + sqrt(1 - rho^2) z2``. Shifting ``log S0`` with the step's end state held fixed moves
    ``z1`` by ``-1 / sqrt(v0 dt)`` and so ``z2`` by ``+rho / (sqrt(1 - rho^2) sqrt(v0 dt))``: the derivative
    of the joint normal log-density is this combination over ``sqrt(v0 dt)``, not ``z1`` alone (which
    leaves gamma biased whenever ``rho != 0``). ``|rho| = 1`` has no such density: the params refuse
    gamma there.
    """
    if rho == _ZERO:
        return z1
    return z1 - rho / rho_bar * z2


@register_jitable
def _payoff(terminal, strike, call):  # type: ignore[no-untyped-def]
    return max(terminal - strike, _ZERO) if call else max(strike - terminal, _ZERO)


@register_jitable
def heston_sums(first_group, n_groups, stride, n_paths, seed, steps, spot, strike, call, discount,  # type: ignore[no-untyped-def]
                control_mean, v0, carry, dt, mean_reversion, long_variance, vol_of_vol, rho, rho_bar):
    """Sums (y, y^2, x, x^2, xy) over the paths of groups ``first_group + i * stride``: both devices run this."""
    sums = (0.0, 0.0, 0.0, 0.0, 0.0)
    for i in range(n_groups):
        group = first_group + i * stride
        first = group * PATHS_PER_GROUP
        if first >= n_paths:
            break
        xa, xb, _, _ = _walk_pair(group, seed, steps, v0, carry, dt, mean_reversion, long_variance, vol_of_vol,
                                  rho, rho_bar)
        terminal = spot * exp32(xa)
        sums = add_sample(sums, discount * _payoff(terminal, strike, call), discount * terminal - control_mean)
        if first + 1 < n_paths:
            terminal = spot * exp32(xb)
            sums = add_sample(sums, discount * _payoff(terminal, strike, call), discount * terminal - control_mean)
    return sums


@register_jitable
def _lane_greeks(x, first, x_vol_up, x_vol_down, x_t_up, x_t_down, spot, strike, call, rate, maturity,  # type: ignore[no-untyped-def]
                 vol_step, t_step, v0, dt):
    """Discounted delta, gamma, vega, rho, theta of one path from its base and bumped terminal log-growths."""
    discount = exp32(-rate * maturity)
    terminal = spot * exp32(x)
    value = discount * _payoff(terminal, strike, call)
    itm = terminal > strike if call else terminal < strike
    slope = _ZERO if not itm else (discount if call else -discount)
    delta = slope * terminal / spot
    gamma = delta / spot * (first / np.float32(math.sqrt(v0 * dt)) - _ONE)
    rho = slope * terminal * maturity - maturity * value
    vega = discount * (_payoff(spot * exp32(x_vol_up), strike, call)
                       - _payoff(spot * exp32(x_vol_down), strike, call)) / (_TWO * vol_step)
    later = exp32(-rate * (maturity + t_step)) * _payoff(spot * exp32(x_t_up), strike, call)
    sooner = exp32(-rate * (maturity - t_step)) * _payoff(spot * exp32(x_t_down), strike, call)
    theta = -(later - sooner) / (_TWO * t_step)
    return delta, gamma, vega, rho, theta


@register_jitable
def heston_greek_sums(first_group, n_groups, stride, n_paths, seed, steps, spot, strike, call, rate, maturity,  # type: ignore[no-untyped-def]
                      v0, vol_step, t_step, carry, mean_reversion, long_variance, vol_of_vol, rho, rho_bar):
    """Sums (g, g^2) of the five Greeks over the paths of groups ``first_group + i * stride``."""
    sums = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    dt = maturity / steps
    sigma0 = math.sqrt(v0)
    v_up = (sigma0 + vol_step) * (sigma0 + vol_step)
    v_down = (sigma0 - vol_step) * (sigma0 - vol_step)
    dt_up = (maturity + t_step) / steps
    dt_down = (maturity - t_step) / steps
    model = (carry, dt, mean_reversion, long_variance, vol_of_vol, rho, rho_bar)
    for i in range(n_groups):
        group = first_group + i * stride
        first = group * PATHS_PER_GROUP
        if first >= n_paths:
            break
        xa, xb, fa, fb = _walk_pair(group, seed, steps, v0, *model)
        ua, ub, _, _ = _walk_pair(group, seed, steps, v_up, *model)
        da, db, _, _ = _walk_pair(group, seed, steps, v_down, *model)
        la, lb, _, _ = _walk_pair(group, seed, steps, v0, carry, dt_up, mean_reversion, long_variance, vol_of_vol,
                                  rho, rho_bar)
        sa, sb, _, _ = _walk_pair(group, seed, steps, v0, carry, dt_down, mean_reversion, long_variance,
                                  vol_of_vol, rho, rho_bar)
        sums = path_greeks.add_greeks(sums, _lane_greeks(xa, fa, ua, da, la, sa, spot, strike, call, rate, maturity,
                                                         vol_step, t_step, v0, dt))
        if first + 1 < n_paths:
            sums = path_greeks.add_greeks(sums, _lane_greeks(xb, fb, ub, db, lb, sb, spot, strike, call, rate,
                                                             maturity, vol_step, t_step, v0, dt))
    return sums


@njit(parallel=True, cache=True, fastmath=True, error_model="numpy")
def _cpu_price_blocks(out, first_block, n_paths, seed, steps, spot, strike, call, discount, control_mean, v0,  # type: ignore[no-untyped-def]
                      carry, dt, mean_reversion, long_variance, vol_of_vol, rho, rho_bar):
    for b in prange(out.shape[0]):
        sums = heston_sums((first_block + b) * GROUPS_PER_BLOCK, GROUPS_PER_BLOCK, 1, n_paths, seed, steps, spot,
                           strike, call, discount, control_mean, v0, carry, dt, mean_reversion, long_variance,
                           vol_of_vol, rho, rho_bar)
        for k in range(len(sums)):
            out[b, k] = sums[k]


@njit(parallel=True, cache=True, fastmath=True, error_model="numpy")
def _cpu_greek_blocks(out, first_block, n_paths, seed, steps, spot, strike, call, rate, maturity, v0, vol_step,  # type: ignore[no-untyped-def]
                      t_step, carry, mean_reversion, long_variance, vol_of_vol, rho, rho_bar):
    for b in prange(out.shape[0]):
        sums = heston_greek_sums((first_block + b) * GROUPS_PER_BLOCK, GROUPS_PER_BLOCK, 1, n_paths, seed, steps,
                                 spot, strike, call, rate, maturity, v0, vol_step, t_step, carry, mean_reversion,
                                 long_variance, vol_of_vol, rho, rho_bar)
        for k in range(len(sums)):
            out[b, k] = sums[k]


@cache
def _cuda_price_kernel() -> Any:
    from numba import float64

    from kernels.gpu import THREADS, block_reduce_store

    per_thread = GROUPS_PER_BLOCK // THREADS

    @cuda.jit(fastmath=True)
    def kernel(out, first_block, n_paths, seed, steps, spot, strike, call, discount, control_mean, v0,  # type: ignore[no-untyped-def]
               carry, dt, mean_reversion, long_variance, vol_of_vol, rho, rho_bar):
        shared = cuda.shared.array((SUM_WIDTH, THREADS), float64)
        tid = cuda.threadIdx.x
        first_group = (first_block + cuda.blockIdx.x) * GROUPS_PER_BLOCK + tid
        sums = heston_sums(first_group, per_thread, THREADS, n_paths, seed, steps, spot, strike, call, discount,
                           control_mean, v0, carry, dt, mean_reversion, long_variance, vol_of_vol, rho, rho_bar)
        for k in range(len(sums)):
            shared[k, tid] = sums[k]
        block_reduce_store(shared, out, cuda.blockIdx.x)

    return kernel


@cache
def _cuda_greek_kernel() -> Any:
    from numba import float64

    from kernels.gpu import THREADS, block_reduce_store

    per_thread = GROUPS_PER_BLOCK // THREADS

    @cuda.jit(fastmath=True)
    def kernel(out, first_block, n_paths, seed, steps, spot, strike, call, rate, maturity, v0, vol_step,  # type: ignore[no-untyped-def]
               t_step, carry, mean_reversion, long_variance, vol_of_vol, rho, rho_bar):
        shared = cuda.shared.array((GREEK_WIDTH, THREADS), float64)
        tid = cuda.threadIdx.x
        first_group = (first_block + cuda.blockIdx.x) * GROUPS_PER_BLOCK + tid
        sums = heston_greek_sums(first_group, per_thread, THREADS, n_paths, seed, steps, spot, strike, call, rate,
                                 maturity, v0, vol_step, t_step, carry, mean_reversion, long_variance, vol_of_vol,
                                 rho, rho_bar)
        for k in range(len(sums)):
            shared[k, tid] = sums[k]
        block_reduce_store(shared, out, cuda.blockIdx.x)

    return kernel


def model_of(p: HestonOptionParams) -> HestonModel:
    """The model parameters of a job."""
    return HestonModel(p.initial_variance, p.long_variance, p.mean_reversion, p.vol_of_vol, p.correlation)


def _model_args(p: HestonOptionParams) -> tuple[Any, ...]:
    f32 = np.float32
    return (f32(p.rate - p.dividend_yield), f32(p.mean_reversion), f32(p.long_variance), f32(p.vol_of_vol),
            f32(p.correlation), f32(math.sqrt(max(1.0 - p.correlation**2, 0.0))))


def _kernel(cpu: Any, cuda_factory: Any, steps: int, passes: int) -> BlockKernel:
    per_block = PATHS_PER_BLOCK * steps * passes
    return BlockKernel(width=SUM_WIDTH if passes == 1 else GREEK_WIDTH, cpu=cpu, cuda_factory=cuda_factory,
                       cpu_chunk_blocks=max(1, CPU_CHUNK_PATH_STEPS // per_block),
                       gpu_chunk_blocks=max(1, GPU_CHUNK_PATH_STEPS // per_block))


def price_args(p: HestonOptionParams, n_paths: int) -> tuple[Any, ...]:
    """The scalar arguments of the price kernel after ``(out, first_block)``."""
    f32 = np.float32
    carry, *model = _model_args(p)
    return (np.int64(n_paths), np.int64(p.seed), np.int64(p.steps), f32(p.spot), f32(p.strike),
            p.kind is OptionKind.CALL, f32(math.exp(-p.rate * p.maturity)), f32(_discounted_forward(p)),
            f32(p.initial_variance), carry, f32(p.maturity / p.steps), *model)


def _discounted_forward(p: HestonOptionParams) -> float:
    return p.spot * math.exp(-p.dividend_yield * p.maturity)


def greeks(p: HestonOptionParams, n_paths: int, device: str, ctx: RunContext) -> dict[str, Any]:
    """The requested Greeks of ``p`` on the price's own paths (common random numbers)."""
    f32 = np.float32
    args = (np.int64(n_paths), np.int64(p.seed), np.int64(p.steps), f32(p.spot), f32(p.strike),
            p.kind is OptionKind.CALL, f32(p.rate), f32(p.maturity), f32(p.initial_variance),
            f32(VOL_BUMP * math.sqrt(p.initial_variance)), f32(MATURITY_BUMP * p.maturity), *_model_args(p))
    kernel = _kernel(_cpu_greek_blocks, _cuda_greek_kernel, p.steps, GREEK_PASSES)
    sums = sum_blocks(kernel, -(-n_paths // PATHS_PER_BLOCK), args, device, ctx)
    return path_greeks.summarise(sums, n_paths, p.greeks, p.confidence, METHOD, BUMP_ERRORS)


def run(p: HestonOptionParams, device: str, ctx: RunContext) -> KernelResult:
    """Price the option; the summary carries the estimate, its error and the semi-analytic Heston price."""
    n_paths = max(p.paths, 3)
    kernel = _kernel(_cpu_price_blocks, _cuda_price_kernel, p.steps, 1)
    # the Greek pass walks five paths per price path: a sixth of the job's progress for the price
    price_ctx = ctx.part(0.0, 1.0 / (1 + GREEK_PASSES)) if p.greeks else ctx
    sums = sum_blocks(kernel, -(-n_paths // PATHS_PER_BLOCK), price_args(p, n_paths), device, price_ctx)
    estimate = estimators.from_sums(sums, n_paths, control_variate=p.control_variate, confidence=p.confidence,
                                    control_scale=2.0 * _discounted_forward(p))
    reference = heston_price(p.spot, p.strike, p.rate, p.dividend_yield, p.maturity, model_of(p),
                             p.kind is OptionKind.CALL)
    summary = {**estimate.as_dict(), "paths": n_paths, "steps": p.steps, "path_steps": n_paths * p.steps,
               "semi_analytic": reference, "discretisation": "full-truncation Euler"}
    if p.greeks:
        summary["greeks"] = greeks(p, n_paths, device, ctx.part(1.0 / (1 + GREEK_PASSES), 1.0))
    return KernelResult(summary=summary, paths=n_paths)
