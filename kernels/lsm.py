"""American and Bermudan options on one asset or a basket by Longstaff-Schwartz (2001) regression.

Two independent sets of paths (``kernels.basket``): the regression paths' basket values at each exercise
date come back to the host, where backward induction regresses the discounted realised cash flow of the
in-the-money paths on polynomials of ``u = A / K`` (under Heston also on ``v, v^2, v u, v u^2``, ``v``
the basket's aggregate variance: ``basis``) to get, per date, the coefficients of the continuation value.
The pricing paths, a different random stream, then follow that rule in the kernel. A rule estimated on
other paths is merely some exercise policy for the pricing paths, so the price is a low-biased estimate
of the true value (up to Monte Carlo error); re-using the regression paths would bias it upwards.
Exercise at time zero is not considered (the first date is one step in). With ``greeks``,
``kernels.fd_greeks`` revalues the same pricing paths under this same rule with each input bumped.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any, Final

import numpy as np
from numba import cuda, njit  # numba.cuda imports without a GPU; kernels compile at first launch
from numba.core.extending import register_jitable

from kernels import basket, estimators, fd_greeks
from kernels.binomial import binomial_price
from kernels.context import KernelResult, RunContext
from kernels.device import CPU
from kernels.estimators import SUM_WIDTH
from kernels.params import AmericanOptionParams, BasketModel, OptionKind

# A date whose in-the-money regression paths are fewer than this many per coefficient is never an
# exercise date: too few points to fit a continuation value.
MIN_POINTS_PER_COEFFICIENT: Final = 4
# Binomial steps of the single-asset GBM reference reported with the price.
REFERENCE_TREE_STEPS: Final = 2_000
# Smallest Cholesky pivot of the unit-diagonal (Jacobi-scaled) Gram matrix accepted: a column whose pivot
# falls below it is, on that date's points, within ~1e-5 (relative) of the span of the columns before it
# (condition number past ~1e10), and the date is fitted without it.
MIN_SCALED_PIVOT: Final = 1e-10


def basis(u: Any, variance: Any | None, degree: int, xp: Any = np) -> Any:
    """Regression design matrix: ``1, u, ..., u^degree`` and, given the variance ``v``, ``v, v^2, v u, v u^2``.

    The column order is the coefficients' order ``basket.continuation`` and ``basket.heston_continuation``
    evaluate; ``xp`` is the array module (NumPy, or cupy for the GPU baseline).
    """
    columns = [xp.ones_like(u)]
    for _ in range(degree):  # running products, as numpy.vander forms them (the GBM rule kept bit for bit)
        columns.append(columns[-1] * u)
    if variance is not None:
        columns += [variance, variance * variance, variance * u, variance * u * u]
    return xp.stack(columns, axis=1)


def exercise_rule(values: np.ndarray, p: AmericanOptionParams, variance: np.ndarray | None = None) -> np.ndarray:
    """Per exercise date before maturity, the continuation value's coefficients and an active flag.

    ``values[path, date]`` are the regression paths' basket values and, under Heston, ``variance[path, date]``
    their aggregate variances (the variance is part of the state: a rule on the basket value alone exercised
    too early, about 2% low against a finite-difference Heston Bermudan). Returns float32
    ``(dates - 1, terms + 1)``: the ``basis`` coefficients, then 1 (active) or 0.
    """
    dates = values.shape[1]
    heston = variance is not None
    # date-major, as ``basket.regression_states_on_device`` leaves them: each date's pass over the paths then
    # reads contiguous memory
    by_date = np.ascontiguousarray(np.concatenate([values.T, variance.T]) if variance is not None else values.T,
                                   dtype=np.float32)
    rule = _empty_rule(p, dates, heston)
    _backward_induction(by_date, dates, heston, *_induction_inputs(p, dates, heston), rule)
    return rule


def device_exercise_rule(by_date: Any, p: AmericanOptionParams, dates: int, heston: bool) -> np.ndarray:
    """``exercise_rule`` on a GPU, from the date-major states ``basket.regression_states_on_device`` left
    there: the same rule as on the host, which solves each date alike (``_cholesky_solve``).

    One block runs the whole backward induction: every date's normal equations are a reduction over all the
    paths and each date needs the cash flows the later dates left, so the dates follow one another inside
    one launch (a launch and a copy per date would cost more than the date's work).
    """
    from kernels import gpu

    rule = _empty_rule(p, dates, heston)
    device_rule = cuda.to_device(rule)
    cash = gpu.empty((by_date.shape[1],), np.float64)
    _cuda_induction(rule.shape[1] - 1)[1, gpu.THREADS](by_date, np.int64(dates), heston,
                                                       *_induction_inputs(p, dates, heston), cash, device_rule)
    return device_rule.copy_to_host()


def _empty_rule(p: AmericanOptionParams, dates: int, heston: bool) -> np.ndarray:
    terms = p.basis_degree + 1 + (basket.VARIANCE_TERMS if heston else 0)
    return np.zeros((max(dates - 1, 1), terms + 1), dtype=np.float32)


def _induction_inputs(p: AmericanOptionParams, dates: int, heston: bool) -> tuple[Any, ...]:
    """``(strike, call, discount per date, degree, min_points)`` as the backward induction takes them."""
    terms = p.basis_degree + 1 + (basket.VARIANCE_TERMS if heston else 0)
    return (float(p.strike), p.kind is OptionKind.CALL, math.exp(-p.rate * p.maturity / dates),
            np.int64(p.basis_degree), np.int64(MIN_POINTS_PER_COEFFICIENT * terms))


@register_jitable
def _row_basis(out, u, v, degree, heston):  # type: ignore[no-untyped-def]
    """One row of ``basis`` (the same products in the same order) into ``out``."""
    out[0] = 1.0
    for k in range(1, degree + 1):
        out[k] = out[k - 1] * u
    if heston:
        c = degree + 1
        out[c], out[c + 1], out[c + 2], out[c + 3] = v, v * v, v * u, v * u * u


@register_jitable
def _accumulate(acc, row, cash, terms):  # type: ignore[no-untyped-def]
    """Add one in-the-money path to its date's normal equations, kept flat in ``acc``: the Gram matrix's lower
    triangle (entry ``(j, k)``, k <= j, at ``j (j + 1) / 2 + k``), then the right-hand side, then the count."""
    lower = terms * (terms + 1) // 2
    for j in range(terms):
        acc[lower + j] += row[j] * cash
        for k in range(j + 1):
            acc[j * (j + 1) // 2 + k] += row[j] * row[k]
    acc[lower + terms] += 1.0


@register_jitable
def _unpack(acc, gram, rhs):  # type: ignore[no-untyped-def]
    """The lower triangle of ``gram`` and ``rhs`` from ``_accumulate``'s flat sums; returns the count."""
    terms = rhs.size
    lower = terms * (terms + 1) // 2
    for j in range(terms):
        rhs[j] = acc[lower + j]
        for k in range(j + 1):
            gram[j, k] = acc[j * (j + 1) // 2 + k]
    return acc[lower + terms]


@register_jitable
def _in_money(value, strike, call):  # type: ignore[no-untyped-def]
    """The exercise value before the floor at 0: positive where the path is in the money."""
    return value - strike if call else strike - value


@register_jitable
def _cholesky_solve(gram, rhs, coeffs, scale, low):  # type: ignore[no-untyped-def]
    """Solve ``gram coeffs = rhs`` (lower triangle of ``gram`` filled) by Cholesky after scaling the
    diagonal to 1, so columns of very different sizes (u^3 against v^2) are conditioned alike.

    A column whose scaled pivot falls below ``MIN_SCALED_PIVOT`` (all but in the span of the columns before
    it on this date's points: early dates, where ``u`` and ``v`` barely spread, make ``v u`` and ``v u^2``
    near copies of ``v``) is dropped: its coefficient is 0 and the others are the least-squares fit on the
    rest, the same on the host and in a CUDA kernel, so no date needs another solver. ``scale`` (terms) and
    ``low`` (terms x terms) are the caller's scratch: NumPy arrays on the host, local arrays in a kernel.
    """
    t = rhs.size
    for j in range(t):
        scale[j] = 1.0 / math.sqrt(gram[j, j]) if gram[j, j] > 0.0 else 0.0
    for j in range(t):
        for k in range(j + 1):
            low[j, k] = gram[j, k] * scale[j] * scale[k]
    for j in range(t):
        pivot = low[j, j]
        for k in range(j):
            pivot -= low[j, k] * low[j, k]
        # a dropped column j gets a unit pivot, nothing below it (the later columns factor as if it were not
        # there) and scale 0, so its coefficient is 0. Selects, not a branch that skips the column: with the
        # branch, ptxas for sm_90 kept the induction kernel's small arrays in 640 B of local memory, not 64
        keep = pivot >= MIN_SCALED_PIVOT
        low[j, j] = math.sqrt(pivot) if keep else 1.0
        scale[j] = scale[j] if keep else 0.0
        for i in range(j + 1, t):
            total = low[i, j]
            for k in range(j):
                total -= low[i, k] * low[j, k]
            low[i, j] = total / low[j, j] if keep else 0.0
    y = coeffs  # solved in place; a dropped column's entry stays 0 (its row of ``low`` is not cleared)
    for i in range(t):  # L y = D rhs
        total = rhs[i] * scale[i]
        for k in range(i):
            total -= low[i, k] * y[k]
        y[i] = total / low[i, i] if scale[i] != 0.0 else 0.0
    for i in range(t - 1, -1, -1):  # L^T x = y, coeffs = D x
        total = y[i]
        for k in range(i + 1, t):
            total -= low[k, i] * y[k]
        y[i] = total / low[i, i] if scale[i] != 0.0 else 0.0
    for i in range(t):
        coeffs[i] = y[i] * scale[i]


@register_jitable
def _initial_cash(by_date, dates, first, stride, strike, call, cash):  # type: ignore[no-untyped-def]
    """Each path's payoff at maturity, for paths ``first, first + stride, ...``."""
    for i in range(first, cash.size, stride):
        cash[i] = max(_in_money(np.float64(by_date[dates - 1, i]), strike, call), 0.0)


@register_jitable
def _date_sums(by_date, dates, heston, date, first, stride, strike, call, discount, degree, cash, row,  # type: ignore[no-untyped-def]
               acc):
    """Discount the cash flows of paths ``first, first + stride, ...`` to ``date`` and add those in the money
    there to the date's normal equations ``acc`` (``_accumulate``)."""
    for i in range(first, cash.size, stride):
        cash[i] *= discount
        value = np.float64(by_date[date, i])
        if _in_money(value, strike, call) > 0.0:
            _row_basis(row, value / strike, np.float64(by_date[dates + date, i]) if heston else 0.0, degree, heston)
            _accumulate(acc, row, cash[i], row.size)


@register_jitable
def _exercise(by_date, dates, heston, date, first, stride, strike, call, degree, coeffs, cash, row):  # type: ignore[no-untyped-def]
    """Stop the paths ``first, first + stride, ...`` whose exercise value at ``date`` beats the continuation
    value ``coeffs`` fits: their cash flow becomes the exercise value."""
    for i in range(first, cash.size, stride):
        value = np.float64(by_date[date, i])
        exercise = _in_money(value, strike, call)
        if exercise > 0.0:
            _row_basis(row, value / strike, np.float64(by_date[dates + date, i]) if heston else 0.0, degree, heston)
            continuation = 0.0
            for j in range(row.size):
                continuation += row[j] * coeffs[j]
            if exercise >= continuation:
                cash[i] = exercise


@njit(cache=True, error_model="numpy")
def _backward_induction(by_date, dates, heston, strike, call, discount, degree, min_points, rule):  # type: ignore[no-untyped-def]
    """Longstaff-Schwartz backward induction into ``rule`` from the date-major ``by_date`` (rows: the basket
    values at each date, then under Heston the aggregate variances): per date, one pass over the paths
    accumulates the small Gram matrix and right-hand side of the in-the-money paths' normal equations, a
    Cholesky solve fits the continuation value, and a second pass stops the paths whose exercise value
    beats it."""
    n = by_date.shape[1]
    terms = rule.shape[1] - 1
    cash = np.empty(n)  # each path's cash flow, discounted to the date being considered
    _initial_cash(by_date, dates, 0, 1, strike, call, cash)
    row = np.empty(terms)
    acc = np.empty(terms * (terms + 1) // 2 + terms + 1)
    gram = np.empty((terms, terms))
    rhs = np.empty(terms)
    coeffs = np.empty(terms)
    scale = np.empty(terms)
    low = np.zeros((terms, terms))
    for date in range(dates - 2, -1, -1):
        acc[:] = 0.0
        _date_sums(by_date, dates, heston, date, 0, 1, strike, call, discount, degree, cash, row, acc)
        count = _unpack(acc, gram, rhs)
        if count < min_points:
            continue
        _cholesky_solve(gram, rhs, coeffs, scale, low)
        _exercise(by_date, dates, heston, date, 0, 1, strike, call, degree, coeffs, cash, row)
        for j in range(terms):
            rule[date, j] = coeffs[j]
        rule[date, terms] = 1.0


# Rows of the shared-memory reduction of the induction kernel's normal equations, reduced a slice at a time:
# (rows x THREADS) float64 stays within a block's 48 kB of static shared memory.
REDUCE_ROWS: Final = 16


@cache
def _cuda_induction(terms: int) -> Any:
    """The backward induction as one CUDA block (``device_exercise_rule``): the same per-date functions as
    ``_backward_induction``, each thread over every ``THREADS``-th path, the normal equations tree-reduced
    in shared memory and solved by thread 0."""
    from numba import float64

    from kernels.gpu import THREADS, block_reduce_store_at

    entries = terms * (terms + 1) // 2 + terms + 1
    slices = -(-entries // REDUCE_ROWS)
    padded = slices * REDUCE_ROWS

    @cuda.jit
    def kernel(by_date, dates, heston, strike, call, discount, degree, min_points, cash, rule):  # type: ignore[no-untyped-def]
        tid = cuda.threadIdx.x
        shared = cuda.shared.array((REDUCE_ROWS, THREADS), float64)
        totals = cuda.shared.array((1, padded), float64)
        coeffs = cuda.shared.array(terms, float64)
        active = cuda.shared.array(1, float64)
        acc = cuda.local.array(padded, float64)
        row = cuda.local.array(terms, float64)
        gram = cuda.local.array((terms, terms), float64)
        rhs = cuda.local.array(terms, float64)
        solved = cuda.local.array(terms, float64)
        scale = cuda.local.array(terms, float64)
        low = cuda.local.array((terms, terms), float64)
        _initial_cash(by_date, dates, tid, THREADS, strike, call, cash)
        for date in range(dates - 2, -1, -1):
            for e in range(padded):
                acc[e] = 0.0
            _date_sums(by_date, dates, heston, date, tid, THREADS, strike, call, discount, degree, cash, row, acc)
            for part in range(slices):
                for k in range(REDUCE_ROWS):
                    shared[k, tid] = acc[part * REDUCE_ROWS + k]
                block_reduce_store_at(shared, totals, 0, part * REDUCE_ROWS)
            if tid == 0:
                active[0] = 0.0
                if _unpack(totals[0], gram, rhs) >= min_points:
                    _cholesky_solve(gram, rhs, solved, scale, low)
                    active[0] = 1.0
                    for j in range(terms):
                        coeffs[j] = solved[j]
                        rule[date, j] = solved[j]
                    rule[date, terms] = 1.0
            cuda.syncthreads()
            if active[0] > 0.0:
                _exercise(by_date, dates, heston, date, tid, THREADS, strike, call, degree, coeffs, cash, row)
            cuda.syncthreads()

    return kernel


def run(p: AmericanOptionParams, device: str, ctx: RunContext) -> KernelResult:
    """Price the option: regression pass, then an independent pricing pass under the fitted rule."""
    n_paths = max(p.paths, 3)
    dates = p.dates()
    every = p.steps // dates
    model = basket.Model.of(p)
    # two passes (regression; pricing, which also pays each path's European), progress by their paths, and
    # with Greeks their revaluations (kernels.fd_greeks) as one more share of the progress
    revaluations = len(fd_greeks.bumped_cases(p, p.greeks)) if p.greeks else 0
    total = p.regression_paths + (1 + revaluations) * n_paths
    regressed, priced = p.regression_paths / total, (p.regression_paths + n_paths) / total
    rule = _fitted_rule(p, model, every, dates, device, ctx.part(0.0, regressed))
    # under Heston the pricing pass also walks each path's step-halving twin under the same rule
    sums = basket.discounted_sums(p, model, rule, every, n_paths, device, ctx.part(regressed, priced),
                                  halving=basket.halving_possible(p, every))
    n_samples = basket.samples(p, n_paths)  # paths, or antithetic pairs
    estimate = estimators.from_sums(sums[:SUM_WIDTH], n_samples, control_variate=p.control_variate,
                                    confidence=p.confidence, control_scale=model.control_scale(p))
    # the European on the same paths, which run on to maturity for it, with the control at maturity
    european = sums[basket.EUROPEAN:basket.EUROPEAN + SUM_WIDTH]
    european_estimate = estimators.from_sums(european, n_samples, control_variate=p.control_variate,
                                             confidence=p.confidence, control_scale=model.control_scale(p))
    summary: dict[str, Any] = {
        **estimate.as_dict(), "paths": n_paths, "regression_paths": p.regression_paths, "assets": model.n,
        "exercise_dates": dates, "steps": p.steps, "path_steps": (n_paths + p.regression_paths) * p.steps,
        "bias": "low (exercise rule fitted on independent paths)",
        "control": _control_name(model) if p.control_variate else "none",
        "exercise_dates_used": int(rule[:, -1].sum()),
        "european_estimate": european_estimate.estimate,
        "early_exercise_premium": estimate.estimate - european_estimate.estimate,
        **basket.scheme(p, sums, n_samples, every, estimate.std_error),
    }
    if p.greeks:
        summary["greeks"] = fd_greeks.estimate(p, rule, every, n_paths, device, ctx.part(priced, 1.0))
    if model.n == 1 and p.model is BasketModel.GBM:
        assert p.volatilities is not None  # validated for GBM
        summary["binomial_reference"] = binomial_price(
            p.spots[0] * p.weights[0], p.strike, p.rate, p.yields()[0], p.volatilities[0], p.maturity,
            p.kind is OptionKind.CALL, REFERENCE_TREE_STEPS, dates)
    return KernelResult(summary=summary, paths=n_paths)


def _fitted_rule(p: AmericanOptionParams, model: basket.Model, every: int, dates: int, device: str,
                 ctx: RunContext) -> np.ndarray:
    """The exercise rule from the regression paths: on a GPU they stay on the device for the induction."""
    if device != CPU:
        return device_exercise_rule(
            basket.regression_states_on_device(p, model, p.regression_paths, every, dates, ctx), p, dates, model.heston)
    values, variance = basket.basket_values(p, model, p.regression_paths, every, dates, ctx)
    return exercise_rule(values, p, variance)


def _control_name(model: basket.Model) -> str:
    if model.mode == basket.MODE_GBM:
        return "geometric basket option, valued in closed form at the exercise date (at maturity if never exercised)"
    return "discounted basket at maturity (martingale)"
