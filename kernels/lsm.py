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

from kernels import basket, estimators, fd_greeks
from kernels.binomial import binomial_price
from kernels.context import KernelResult, RunContext
from protocol.params import AmericanOptionParams, BasketModel, OptionKind

# A date whose in-the-money regression paths are fewer than this many per coefficient is never an
# exercise date: too few points to fit a continuation value.
MIN_POINTS_PER_COEFFICIENT: Final = 4
# Binomial steps of the single-asset GBM reference reported with the price.
REFERENCE_TREE_STEPS: Final = 2_000


def basis(u: Any, variance: Any | None, degree: int, xp: Any = np) -> Any:
    """Regression design matrix: ``1, u, ..., u^degree`` and, given the variance ``v``, ``v, v^2, v u, v u^2``.

    The column order is the coefficients' order ``basket.continuation`` evaluates; ``xp`` is the array
    module (NumPy, or cupy for the GPU baseline).
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
    dt = p.maturity / dates
    call = p.kind is OptionKind.CALL
    degree = p.basis_degree
    terms = degree + 1 + (basket.VARIANCE_TERMS if variance is not None else 0)
    rule = np.zeros((max(dates - 1, 1), terms + 1), dtype=np.float32)
    values = values.astype(np.float64)
    exercise = (values - p.strike) if call else (p.strike - values)
    np.maximum(exercise, 0.0, out=exercise)
    cash = exercise[:, -1].copy()  # cash flow of each path, discounted to the date being considered
    for date in range(dates - 2, -1, -1):
        cash *= math.exp(-p.rate * dt)
        itm = exercise[:, date] > 0
        if np.count_nonzero(itm) < MIN_POINTS_PER_COEFFICIENT * terms:
            continue
        design = basis(values[itm, date] / p.strike,
                       None if variance is None else variance[itm, date].astype(np.float64), degree)
        coeffs, *_ = np.linalg.lstsq(design, cash[itm], rcond=None)
        continuation = design @ coeffs
        stop = exercise[itm, date] >= continuation
        where = np.flatnonzero(itm)[stop]
        cash[where] = exercise[where, date]
        rule[date, :terms] = coeffs
        rule[date, terms] = 1.0
    return rule


def run(p: AmericanOptionParams, device: str, ctx: RunContext) -> KernelResult:
    """Price the option: regression pass, then an independent pricing pass under the fitted rule."""
    n_paths = max(p.paths, 3)
    dates = p.dates()
    every = p.steps // dates
    model = basket.Model.of(p)
    # three passes (regression, pricing, the European on the pricing paths), progress by their paths, and
    # with Greeks their revaluations (kernels.fd_greeks) as one more share of the progress
    revaluations = len(fd_greeks.bumped_cases(p, p.greeks)) if p.greeks else 0
    total = p.regression_paths + (2 + revaluations) * n_paths
    regressed, priced = p.regression_paths / total, (p.regression_paths + n_paths) / total
    european_done = (p.regression_paths + 2 * n_paths) / total
    values, variance = basket.basket_values(p, model, p.regression_paths, every, dates, device,
                                            ctx.part(0.0, regressed))
    rule = exercise_rule(values, p, variance)
    sums = basket.discounted_sums(p, model, rule, every, n_paths, device, ctx.part(regressed, priced))
    estimate = estimators.from_sums(sums, n_paths, control_variate=p.control_variate, confidence=p.confidence,
                                    control_scale=model.control_scale(p))
    european = basket.discounted_sums(p, model, basket.no_exercise(), p.steps, n_paths, device,
                                      ctx.part(priced, european_done))
    european_estimate = estimators.from_sums(european, n_paths, control_variate=p.control_variate,
                                             confidence=p.confidence, control_scale=model.control_scale(p))
    summary: dict[str, Any] = {
        **estimate.as_dict(), "paths": n_paths, "regression_paths": p.regression_paths, "assets": model.n,
        "exercise_dates": dates, "steps": p.steps, "path_steps": (n_paths + p.regression_paths) * p.steps,
        "bias": "low (exercise rule fitted on independent paths)",
        "exercise_dates_used": int(rule[:, -1].sum()),
        "european_estimate": european_estimate.estimate,
        "early_exercise_premium": estimate.estimate - european_estimate.estimate,
    }
    if p.greeks:
        summary["greeks"] = fd_greeks.estimate(p, rule, every, n_paths, device, ctx.part(european_done, 1.0))
    if model.n == 1 and p.model is BasketModel.GBM:
        assert p.volatilities is not None  # validated for GBM
        summary["binomial_reference"] = binomial_price(
            p.spots[0] * p.weights[0], p.strike, p.rate, p.yields()[0], p.volatilities[0], p.maturity,
            p.kind is OptionKind.CALL, REFERENCE_TREE_STEPS, dates)
    return KernelResult(summary=summary, paths=n_paths)
