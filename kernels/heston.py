"""European call/put under the Heston stochastic-volatility model: Andersen's QE scheme, price control.

Each path takes ``steps`` steps of the variance ``v`` and the log-price ``x`` by the quadratic-exponential
(QE) scheme of Andersen (2008, "Simple and efficient simulation of the Heston stochastic volatility
model", J. Comp. Finance 11(3)), made for the regime where the Feller condition ``2 kappa theta >= xi^2``
is strongly violated and full-truncation Euler is biased by percents. Given ``v``, the next variance is
drawn from a distribution with the exact conditional mean ``m`` and variance ``s^2`` of the CIR process:
``psi = s^2 / m^2 <= 1.5``: ``a (b + Zv)^2`` (a scaled non-central chi-square, moment-matched); above:
zero with probability ``p``, else exponential (the mass the true law puts near zero). The log-price
follows the exact integrated form with the time integral of ``v`` by the trapezoid rule:

    x += (r - q) dt + K0* + K1 v + K2 v' + sqrt(K3 v + K4 v') Z,   Z independent of Zv

with ``K1, K2 = dt/2 (kappa rho / xi - 1/2) -+ rho / xi``, ``K3 = K4 = dt/2 (1 - rho^2)`` and ``K0*``
Andersen's martingale correction: ``K0* = -log E[exp(A v') | v] - (K1 + K3/2) v``, ``A = K2 + K4/2``, so
``E[exp(x' - x - (r - q) dt) | v] = 1`` exactly and the discounted simulated price is a martingale: the
control ``e^{-rT} S_T - S_0 e^{-qT}`` has mean zero at any step count. (Where ``A`` is too large for that
expectation to exist, possible only for ``rho > 0`` and long steps, the step falls back to the
first-order ``K0* = -A m``.) Uniforms come from the same normals, ``U = Phi(Zv)``, and one generator call
gives both normals of a step for two paths (counter = (path pair, step)).

**Discretisation bias**, reported beside the statistical error: each price path also walks a coarse
path of ``steps / 2`` steps driven by the same normals (each coarse step by ``(Z_a + Z_b) / sqrt 2`` of
its two fine steps: normal, independent across steps, so the coarse scheme is exact in law), and the
job reports the mean of ``coarse - fine`` payoffs with its standard error: for a first-order scheme
that is the fine price's bias (bias(N/2) - bias(N) = bias(N)), estimated on common random numbers.

Greeks (when asked): delta pathwise; gamma the likelihood ratio of the first step times the pathwise
delta: given the first variance step (which does not depend on the spot), ``x_1`` is normal with
standard deviation ``sqrt(K3 v0 + K4 v1)`` around a mean that moves one for one with ``log S0``, so the
weight is ``Z_1 / sqrt(K3 v0 + K4 v1)`` (``|rho| = 1`` has no density and is refused); rho pathwise;
vega (to the initial volatility ``sqrt(v0)``) and theta by central finite differences on common random
numbers: the same normals drive the bumped paths in the same thread.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np
from numba import njit, prange
from numba.core.extending import register_jitable

from kernels import estimators, path_greeks
from kernels.context import KernelResult, RunContext
from kernels.cuda_reduce import block_sums_kernel
from kernels.estimators import SUM_WIDTH, add_sample
from kernels.heston_reference import HestonModel, heston_price
from kernels.launch import BlockKernel, sum_blocks
from kernels.params import Greek, HestonOptionParams, OptionKind
from kernels.path_greeks import WIDTH as GREEK_WIDTH
from kernels.philox import normals4
from kernels.special import exp32, normal_tail

PATHS_PER_GROUP: Final = 2  # a generator call's four normals are two paths' (Zv, Z) of one step
GROUPS_PER_BLOCK: Final = 1024  # 4 groups (8 paths) per GPU thread
PATHS_PER_BLOCK: Final = GROUPS_PER_BLOCK * PATHS_PER_GROUP
CPU_CHUNK_PATH_STEPS: Final = 2**23
GPU_CHUNK_PATH_STEPS: Final = 2**32
# Relative bumps of the finite-difference Greeks: small enough that the central difference's bias
# (relative ~ bump^2) is far below the standard error, large enough against float32 rounding of S_T.
VOL_BUMP: Final = 0.01
MATURITY_BUMP: Final = 0.01
GREEK_PASSES: Final = 5  # paths per sample in the Greeks kernel: base, vol up/down, maturity up/down
PRICE_WIDTH: Final = SUM_WIDTH + 2  # the price's five sums, then sum d and sum d^2 of d = coarse - fine
SCHEME: Final = "Andersen QE with martingale correction"
PSI_CRITICAL: Final = 1.5  # Andersen's switch between the quadratic and the exponential branch
# Rows of the step-constant table (``step_constants``): the job's step, the coarse (double) step of
# the bias estimate, and the theta bumps' steps; columns as ``qe_step`` reads them.
FINE, COARSE, LONGER, SHORTER = 0, 1, 2, 3
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
_PSI_C: Final = np.float32(PSI_CRITICAL)
_ROOT_HALF: Final = np.float32(math.sqrt(0.5))
_DETERMINISTIC: Final = np.float32(1e-12)  # psi below this: the variance step is its mean (xi = 0: Black-Scholes)


def step_constants(carry: float, kappa: float, theta: float, xi: float, rho: float, dt: float) -> list[float]:
    """``[carry dt, e^{-kappa dt}, c1, c2, theta, K1, K2, K3, K4]`` of one QE step of length ``dt`` (float64).

    The CIR step's conditional variance is ``s^2 = c1 v + c2`` (``c1 = xi^2 e^{-k dt}(1 - e^{-k dt})/k``,
    ``c2 = theta xi^2 (1 - e^{-k dt})^2 / (2k)``), computed with ``expm1`` so that a tiny ``kappa`` (or the
    Black-Scholes case ``kappa = xi = 0``) takes its limit instead of dividing by zero.
    """
    decay = math.exp(-kappa * dt)
    spent = -math.expm1(-kappa * dt)  # 1 - e^{-kappa dt}
    per_kappa = spent / kappa if kappa > 0 else dt  # (1 - e^{-kappa dt}) / kappa
    c1 = xi * xi * decay * per_kappa
    c2 = 0.5 * theta * xi * xi * spent * per_kappa
    rho_over_xi = rho / xi if xi > 0 else 0.0
    drift = 0.5 * dt * (kappa * rho_over_xi - 0.5)
    k3 = 0.5 * dt * (1.0 - rho * rho)
    return [carry * dt, decay, c1, c2, theta, drift - rho_over_xi, drift + rho_over_xi, k3, k3]


def constant_table(carry: float, kappa: float, theta: float, xi: float, rho: float, dt: float,
                   maturity_bump: float = MATURITY_BUMP) -> np.ndarray:
    """Rows FINE, COARSE, LONGER, SHORTER of ``step_constants`` (float32), as every Heston kernel takes them."""
    steps = [dt, 2.0 * dt, dt * (1.0 + maturity_bump), dt * (1.0 - maturity_bump)]
    return np.asarray([step_constants(carry, kappa, theta, xi, rho, h) for h in steps], dtype=np.float32)


@register_jitable
def qe_step(x, v, zv, z, table, row):  # type: ignore[no-untyped-def]
    """One QE step of the log-price ``x`` and the variance ``v`` (float32) with the constants ``table[row]``.

    Returns the new ``x``, the new ``v`` and the standard deviation ``sqrt(K3 v + K4 v')`` of the step's
    price shock ``Z`` (the likelihood-ratio weight of the first step is ``Z`` over it).
    """
    return qe_move(x, v, zv, z, table[row, 0], table[row, 1], table[row, 2], table[row, 3], table[row, 4],
                   table[row, 5], table[row, 6], table[row, 7], table[row, 8])


@register_jitable
def qe_move(x, v, zv, z, carry_dt, decay, c1, c2, theta, k1, k2, k3, k4):  # type: ignore[no-untyped-def]
    """``qe_step`` with the step's constants (a row of ``step_constants``) as scalars: the one QE step every
    Heston kernel takes, whether its constants sit in a table row (``heston_option``, ``option_book``) or in
    a basket's per-asset rows (``kernels.basket``)."""
    mean = theta + (v - theta) * decay
    spread = v * c1 + c2
    a = k2 + _HALF * k4
    psi = spread / (mean * mean)
    if psi < _DETERMINISTIC:  # no vol of vol: the variance moves to its mean (exact)
        v_next = mean
        k0 = -a * mean
    elif psi <= _PSI_C:
        inverse = _TWO / psi
        b2 = inverse - _ONE + math.sqrt(inverse) * math.sqrt(inverse - _ONE)
        scale = mean / (_ONE + b2)
        root = math.sqrt(b2) + zv
        v_next = scale * root * root
        room = _ONE - _TWO * a * scale
        k0 = -a * b2 * scale / room + _HALF * math.log(room) if room > _ZERO else -a * mean
    else:
        p = (psi - _ONE) / (psi + _ONE)
        beta = (_ONE - p) / mean
        tail = normal_tail(zv)  # 1 - U with U = Phi(Zv)
        v_next = math.log((_ONE - p) / tail) / beta if tail < _ONE - p else _ZERO
        k0 = -math.log(p + beta * (_ONE - p) / (beta - a)) if a < beta else -a * mean
    k0 = k0 - (k1 + _HALF * k3) * v
    sd = math.sqrt(max(k3 * v + k4 * v_next, _ZERO))
    return x + carry_dt + k0 + k1 * v + k2 * v_next + sd * z, v_next, sd


@register_jitable
def _walk(group, seed, steps, v0, table, row, lane):  # type: ignore[no-untyped-def]
    """Terminal log-growth of path ``lane`` (0 or 1) of ``group`` and its first step's likelihood-ratio weight."""
    x = _ZERO
    v = v0
    weight = _ZERO
    for step in range(steps):
        a1, a2, b1, b2 = normals4(group, step, seed)
        zv, z = (a1, a2) if lane == 0 else (b1, b2)
        x, v, sd = qe_step(x, v, zv, z, table, row)
        if step == 0:
            weight = z / sd
    return x, weight


@register_jitable
def _walk_with_coarse(group, seed, steps, v0, table, lane):  # type: ignore[no-untyped-def]
    """Terminal log-growths of path ``lane`` of ``group`` at ``steps`` steps and at ``steps // 2`` double
    steps driven by the sums of its pairs of normals (the step-halving pair; coarse = fine if steps is odd)."""
    x = _ZERO
    v = v0
    xc = _ZERO
    vc = v0
    zv_prev = z_prev = _ZERO
    for step in range(steps):
        a1, a2, b1, b2 = normals4(group, step, seed)
        zv, z = (a1, a2) if lane == 0 else (b1, b2)
        x, v, _ = qe_step(x, v, zv, z, table, FINE)
        if step % 2 == 1:
            xc, vc, _ = qe_step(xc, vc, (zv_prev + zv) * _ROOT_HALF, (z_prev + z) * _ROOT_HALF, table, COARSE)
        zv_prev, z_prev = zv, z
    if steps % 2 == 1:
        xc = x
    return x, xc


@register_jitable
def _payoff(terminal, strike, call):  # type: ignore[no-untyped-def]
    return max(terminal - strike, _ZERO) if call else max(strike - terminal, _ZERO)


@register_jitable
def heston_sums(first_group, n_groups, stride, n_paths, seed, steps, spot, strike, call, discount,  # type: ignore[no-untyped-def]
                control_mean, v0, table):
    """Sums (y, y^2, x, x^2, xy, d, d^2) over the paths of groups ``first_group + i * stride``, ``d`` the
    coarse-minus-fine payoff of the step-halving pair: both devices run this."""
    sums = (0.0, 0.0, 0.0, 0.0, 0.0)
    gap = 0.0
    gap2 = 0.0
    for i in range(n_groups):
        group = first_group + i * stride
        first = group * PATHS_PER_GROUP
        if first >= n_paths:
            break
        for lane in range(min(PATHS_PER_GROUP, n_paths - first)):
            x, xc = _walk_with_coarse(group, seed, steps, v0, table, lane)
            terminal = spot * exp32(x)
            y = discount * _payoff(terminal, strike, call)
            sums = add_sample(sums, y, discount * terminal - control_mean)
            d = np.float64(discount * _payoff(spot * exp32(xc), strike, call) - y)
            gap += d
            gap2 += d * d
    return sums[0], sums[1], sums[2], sums[3], sums[4], gap, gap2


@register_jitable
def lane_greeks(x, weight, x_vol_up, x_vol_down, x_t_up, x_t_down, spot, strike, call, rate, maturity,  # type: ignore[no-untyped-def]
                vol_step, t_step):
    """Discounted delta, gamma, vega, rho, theta of one path from its base and bumped terminal log-growths
    and its first step's likelihood-ratio weight."""
    discount = exp32(-rate * maturity)
    terminal = spot * exp32(x)
    value = discount * _payoff(terminal, strike, call)
    itm = terminal > strike if call else terminal < strike
    slope = _ZERO if not itm else (discount if call else -discount)
    delta = slope * terminal / spot
    gamma = delta / spot * (weight - _ONE)
    rho = slope * terminal * maturity - maturity * value
    vega = discount * (_payoff(spot * exp32(x_vol_up), strike, call)
                       - _payoff(spot * exp32(x_vol_down), strike, call)) / (_TWO * vol_step)
    later = exp32(-rate * (maturity + t_step)) * _payoff(spot * exp32(x_t_up), strike, call)
    sooner = exp32(-rate * (maturity - t_step)) * _payoff(spot * exp32(x_t_down), strike, call)
    theta = -(later - sooner) / (_TWO * t_step)
    return delta, gamma, vega, rho, theta


@register_jitable
def heston_greek_sums(first_group, n_groups, stride, n_paths, seed, steps, spot, strike, call, rate, maturity,  # type: ignore[no-untyped-def]
                      v0, vol_step, t_step, table):
    """Sums (g, g^2) of the five Greeks over the paths of groups ``first_group + i * stride``."""
    sums = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    sigma0 = math.sqrt(v0)
    v_up = (sigma0 + vol_step) * (sigma0 + vol_step)
    v_down = (sigma0 - vol_step) * (sigma0 - vol_step)
    for i in range(n_groups):
        group = first_group + i * stride
        first = group * PATHS_PER_GROUP
        if first >= n_paths:
            break
        for lane in range(min(PATHS_PER_GROUP, n_paths - first)):
            x, weight = _walk(group, seed, steps, v0, table, FINE, lane)
            up, _ = _walk(group, seed, steps, v_up, table, FINE, lane)
            down, _ = _walk(group, seed, steps, v_down, table, FINE, lane)
            later, _ = _walk(group, seed, steps, v0, table, LONGER, lane)
            sooner, _ = _walk(group, seed, steps, v0, table, SHORTER, lane)
            sums = path_greeks.add_greeks(sums, lane_greeks(x, weight, up, down, later, sooner, spot, strike, call,
                                                            rate, maturity, vol_step, t_step))
    return sums


@njit(parallel=True, cache=True, fastmath=True, error_model="numpy")
def _cpu_price_blocks(out, first_block, n_paths, seed, steps, spot, strike, call, discount, control_mean, v0,  # type: ignore[no-untyped-def]
                      table):
    for b in prange(out.shape[0]):
        sums = heston_sums((first_block + b) * GROUPS_PER_BLOCK, GROUPS_PER_BLOCK, 1, n_paths, seed, steps, spot,
                           strike, call, discount, control_mean, v0, table)
        for k in range(len(sums)):
            out[b, k] = sums[k]


@njit(parallel=True, cache=True, fastmath=True, error_model="numpy")
def _cpu_greek_blocks(out, first_block, n_paths, seed, steps, spot, strike, call, rate, maturity, v0, vol_step,  # type: ignore[no-untyped-def]
                      t_step, table):
    for b in prange(out.shape[0]):
        sums = heston_greek_sums((first_block + b) * GROUPS_PER_BLOCK, GROUPS_PER_BLOCK, 1, n_paths, seed, steps,
                                 spot, strike, call, rate, maturity, v0, vol_step, t_step, table)
        for k in range(len(sums)):
            out[b, k] = sums[k]


_CUDA_PRICE: Final = block_sums_kernel(heston_sums, width=PRICE_WIDTH, items_per_block=GROUPS_PER_BLOCK)
_CUDA_GREEKS: Final = block_sums_kernel(heston_greek_sums, width=GREEK_WIDTH, items_per_block=GROUPS_PER_BLOCK)


def model_of(p: HestonOptionParams) -> HestonModel:
    """The model parameters of a job."""
    return HestonModel(p.initial_variance, p.long_variance, p.mean_reversion, p.vol_of_vol, p.correlation)


def _table(p: HestonOptionParams) -> np.ndarray:
    return constant_table(p.rate - p.dividend_yield, p.mean_reversion, p.long_variance, p.vol_of_vol,
                          p.correlation, p.maturity / p.steps)


def _kernel(cpu: Any, cuda_factory: Any, steps: int, passes: float, width: int) -> BlockKernel:
    per_block = int(PATHS_PER_BLOCK * steps * passes)
    return BlockKernel(width=width, cpu=cpu, cuda_factory=cuda_factory,
                       cpu_chunk_blocks=max(1, CPU_CHUNK_PATH_STEPS // per_block),
                       gpu_chunk_blocks=max(1, GPU_CHUNK_PATH_STEPS // per_block))


def price_args(p: HestonOptionParams, n_paths: int) -> tuple[Any, ...]:
    """The arguments of the price kernel after ``(out, first_block)``."""
    f32 = np.float32
    return (np.int64(n_paths), np.int64(p.seed), np.int64(p.steps), f32(p.spot), f32(p.strike),
            p.kind is OptionKind.CALL, f32(math.exp(-p.rate * p.maturity)), f32(_discounted_forward(p)),
            f32(p.initial_variance), _table(p))


def _discounted_forward(p: HestonOptionParams) -> float:
    return p.spot * math.exp(-p.dividend_yield * p.maturity)


def greeks(p: HestonOptionParams, n_paths: int, device: str, ctx: RunContext) -> dict[str, Any]:
    """The requested Greeks of ``p`` on the price's own paths (common random numbers)."""
    f32 = np.float32
    args = (np.int64(n_paths), np.int64(p.seed), np.int64(p.steps), f32(p.spot), f32(p.strike),
            p.kind is OptionKind.CALL, f32(p.rate), f32(p.maturity), f32(p.initial_variance),
            f32(VOL_BUMP * math.sqrt(p.initial_variance)), f32(MATURITY_BUMP * p.maturity), _table(p))
    kernel = _kernel(_cpu_greek_blocks, _CUDA_GREEKS, p.steps, GREEK_PASSES, GREEK_WIDTH)
    sums = sum_blocks(kernel, -(-n_paths // PATHS_PER_BLOCK), args, device, ctx)
    return path_greeks.summarise(sums, n_paths, p.greeks, p.confidence, METHOD, BUMP_ERRORS)


def discretisation_bias(gap: float, gap2: float, n: int, steps: int, std_error: float, confidence: float,
                        halved: str = "") -> dict[str, Any]:
    """The step-halving estimate of the price's discretisation bias from ``sum d`` and ``sum d^2``.

    ``halved`` names what else the coarse run halves (a basket option's exercise dates), for the method.
    """
    if steps % 2:
        return {"method": "not estimated: an odd number of steps has no step-halving pair",
                "warning": "the discretisation bias is not bounded; use an even number of steps"}
    mean = gap / n
    spread = math.sqrt(max((gap2 - gap * gap / n) / (n - 1), 0.0) / n)
    bias = estimators.interval(mean, spread, n, confidence).as_dict()
    out: dict[str, Any] = {**bias, "method": f"step halving on common random numbers: {steps // 2} against {steps} "
                                             f"steps{halved} (first order: the difference is the bias at the "
                                             "job's steps)"}
    z = estimators.z_score(confidence)
    if abs(mean) > z * spread and abs(mean) > std_error:
        out["warning"] = (f"estimated discretisation bias {mean:+.3g} exceeds the standard error {std_error:.3g}: "
                          "use more steps")
    return out


def run(p: HestonOptionParams, device: str, ctx: RunContext) -> KernelResult:
    """Price the option; the summary carries the estimate, its error, the step-halving bias estimate and the
    semi-analytic Heston price."""
    n_paths = max(p.paths, 3)
    # a price path also walks its coarse twin: about 1.5 walks per path
    kernel = _kernel(_cpu_price_blocks, _CUDA_PRICE, p.steps, 1.5, PRICE_WIDTH)
    # the Greek pass walks five paths per price path: a sixth of the job's progress for the price
    price_ctx = ctx.part(0.0, 1.0 / (1 + GREEK_PASSES)) if p.greeks else ctx
    sums = sum_blocks(kernel, -(-n_paths // PATHS_PER_BLOCK), price_args(p, n_paths), device, price_ctx)
    estimate = estimators.from_sums(sums[:SUM_WIDTH], n_paths, control_variate=p.control_variate,
                                    confidence=p.confidence, control_scale=2.0 * _discounted_forward(p))
    reference = heston_price(p.spot, p.strike, p.rate, p.dividend_yield, p.maturity, model_of(p),
                             p.kind is OptionKind.CALL)
    bias = discretisation_bias(float(sums[SUM_WIDTH]), float(sums[SUM_WIDTH + 1]), n_paths, p.steps,
                               estimate.std_error, p.confidence)
    summary = {**estimate.as_dict(), "paths": n_paths, "steps": p.steps, "path_steps": n_paths * p.steps,
               "semi_analytic": reference, "discretisation": SCHEME, "discretisation_bias": bias}
    if p.greeks:
        summary["greeks"] = greeks(p, n_paths, device, ctx.part(1.0 / (1 + GREEK_PASSES), 1.0))
    return KernelResult(summary=summary, paths=n_paths)
