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
from typing import Any, Final

import numpy as np
from numba import njit

from kernels import basket, estimators, fd_greeks
from kernels.binomial import binomial_price
from kernels.context import KernelResult, RunContext
from kernels.estimators import SUM_WIDTH
from kernels.params import AmericanOptionParams, BasketModel, OptionKind

# A date whose in-the-money regression paths are fewer than this many per coefficient is never an
# exercise date: too few points to fit a continuation value.
MIN_POINTS_PER_COEFFICIENT: Final = 4
# Binomial steps of the single-asset GBM reference reported with the price.
REFERENCE_TREE_STEPS: Final = 2_000
# Smallest Cholesky pivot of the unit-diagonal (Jacobi-scaled) Gram matrix accepted: below it the basis is
# nearly collinear on that date's points (condition number past ~1e10) and the date is fitted by lstsq.
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
    degree = p.basis_degree
    heston = variance is not None
    terms = degree + 1 + (basket.VARIANCE_TERMS if heston else 0)
    rule = np.zeros((max(dates - 1, 1), terms + 1), dtype=np.float32)
    # date-major: each date's pass over the paths then reads contiguous memory
    states = np.ascontiguousarray(values.T, dtype=np.float32)
    variances = np.ascontiguousarray(variance.T if heston else np.zeros((dates, 1)), dtype=np.float32)
    _backward_induction(states, variances, heston, float(p.strike), p.kind is OptionKind.CALL,
                        math.exp(-p.rate * p.maturity / dates), degree, MIN_POINTS_PER_COEFFICIENT * terms, rule)
    return rule


@njit(cache=True, error_model="numpy")
def _row_basis(out, u, v, degree, heston):  # type: ignore[no-untyped-def]
    """One row of ``basis`` (the same products in the same order) into ``out``."""
    out[0] = 1.0
    for k in range(1, degree + 1):
        out[k] = out[k - 1] * u
    if heston:
        c = degree + 1
        out[c], out[c + 1], out[c + 2], out[c + 3] = v, v * v, v * u, v * u * u


@njit(cache=True, error_model="numpy")
def _cholesky_solve(gram, rhs, coeffs):  # type: ignore[no-untyped-def]
    """Solve ``gram coeffs = rhs`` (lower triangle of ``gram`` filled) by Cholesky after scaling the
    diagonal to 1, so columns of very different sizes (u^3 against v^2) are conditioned alike; False,
    leaving ``coeffs``, where a scaled pivot falls below ``MIN_SCALED_PIVOT``."""
    t = rhs.size
    scale = np.empty(t)
    for j in range(t):
        if gram[j, j] <= 0.0:
            return False
        scale[j] = 1.0 / math.sqrt(gram[j, j])
    low = np.zeros((t, t))
    for j in range(t):
        for k in range(j + 1):
            low[j, k] = gram[j, k] * scale[j] * scale[k]
    for j in range(t):
        pivot = low[j, j]
        for k in range(j):
            pivot -= low[j, k] * low[j, k]
        if pivot < MIN_SCALED_PIVOT:
            return False
        low[j, j] = math.sqrt(pivot)
        for i in range(j + 1, t):
            total = low[i, j]
            for k in range(j):
                total -= low[i, k] * low[j, k]
            low[i, j] = total / low[j, j]
    y = np.empty(t)
    for i in range(t):  # L y = D rhs
        total = rhs[i] * scale[i]
        for k in range(i):
            total -= low[i, k] * y[k]
        y[i] = total / low[i, i]
    for i in range(t - 1, -1, -1):  # L^T x = y, coeffs = D x
        total = y[i]
        for k in range(i + 1, t):
            total -= low[k, i] * y[k]
        y[i] = total / low[i, i]
    for i in range(t):
        coeffs[i] = y[i] * scale[i]
    return True


@njit(cache=True, error_model="numpy")
def _backward_induction(values, variance, heston, strike, call, discount, degree, min_points, rule):  # type: ignore[no-untyped-def]
    """Longstaff-Schwartz backward induction into ``rule`` from ``values[date, path]`` (and, under Heston,
    ``variance[date, path]``): per date, one pass over the paths accumulates the
    small Gram matrix and right-hand side of the in-the-money paths' normal equations, a Cholesky solve
    fits the continuation value, and a second pass stops the paths whose exercise value beats it."""
    dates, n = values.shape
    terms = rule.shape[1] - 1
    cash = np.empty(n)  # each path's cash flow, discounted to the date being considered
    for i in range(n):
        value = np.float64(values[dates - 1, i])
        cash[i] = max(value - strike, 0.0) if call else max(strike - value, 0.0)
    row = np.empty(terms)
    gram = np.empty((terms, terms))
    rhs = np.empty(terms)
    coeffs = np.empty(terms)
    for date in range(dates - 2, -1, -1):
        gram[:] = 0.0
        rhs[:] = 0.0
        count = 0
        for i in range(n):
            cash[i] *= discount
            value = np.float64(values[date, i])
            exercise = value - strike if call else strike - value
            if exercise > 0.0:
                count += 1
                _row_basis(row, value / strike, np.float64(variance[date, i]) if heston else 0.0, degree, heston)
                for j in range(terms):
                    rhs[j] += row[j] * cash[i]
                    for k in range(j + 1):
                        gram[j, k] += row[j] * row[k]
        if count < min_points:
            continue
        if not _cholesky_solve(gram, rhs, coeffs):  # nearly collinear: least squares by SVD, as before
            design = np.empty((count, terms))
            target = np.empty(count)
            m = 0
            for i in range(n):
                value = np.float64(values[date, i])
                if (value - strike if call else strike - value) > 0.0:
                    _row_basis(design[m], value / strike, np.float64(variance[date, i]) if heston else 0.0,
                               degree, heston)
                    target[m] = cash[i]
                    m += 1
            # numpy's default cut-off for small singular values (numba's default, -1, keeps them all)
            coeffs[:] = np.linalg.lstsq(design, target, rcond=np.finfo(np.float64).eps * max(count, terms))[0]
        for i in range(n):
            value = np.float64(values[date, i])
            exercise = value - strike if call else strike - value
            if exercise > 0.0:
                _row_basis(row, value / strike, np.float64(variance[date, i]) if heston else 0.0, degree, heston)
                continuation = 0.0
                for j in range(terms):
                    continuation += row[j] * coeffs[j]
                if exercise >= continuation:
                    cash[i] = exercise
        for j in range(terms):
            rule[date, j] = coeffs[j]
        rule[date, terms] = 1.0


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
    values, variance = basket.basket_values(p, model, p.regression_paths, every, dates, device,
                                            ctx.part(0.0, regressed))
    rule = exercise_rule(values, p, variance)
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


def _control_name(model: basket.Model) -> str:
    if model.mode == basket.MODE_GBM:
        return "geometric basket option, valued in closed form at the exercise date (at maturity if never exercised)"
    return "discounted basket at maturity (martingale)"
