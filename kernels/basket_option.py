"""The ``basket_option`` job: a European option on a basket, priced on the basket paths, with its Greeks.

The price comes from ``kernels.basket``'s path kernels with no early exercise; the Greeks, when asked
for, from ``kernels.fd_greeks``, whose revaluations walk the same paths. Both sit below this module, as
they sit below ``kernels.lsm`` (the ``american_option`` job).
"""

from __future__ import annotations

from typing import Any

from kernels import estimators, fd_greeks
from kernels.basket import MODE_GBM, Model, discounted_sums, halving_possible, no_exercise, samples, scheme
from kernels.context import KernelResult, RunContext
from kernels.estimators import SUM_WIDTH
from kernels.params import BasketOptionParams


def run(p: BasketOptionParams, device: str, ctx: RunContext) -> KernelResult:
    """Price the European basket option; the summary names the control and its known mean and, under
    Heston, the step-halving estimate of the discretisation bias."""
    n_paths = max(p.paths, 3)
    model = Model.of(p)
    # with Greeks the revaluations (kernels.fd_greeks) follow the price pass: half the progress each
    price_ctx = ctx.part(0.0, 0.5) if p.greeks else ctx
    sums = discounted_sums(p, model, no_exercise(), p.steps, n_paths, device, price_ctx,
                           halving=halving_possible(p, p.steps))
    estimate = estimators.from_sums(sums[:SUM_WIDTH], samples(p, n_paths), control_variate=p.control_variate,
                                    confidence=p.confidence, control_scale=model.control_scale(p))
    summary: dict[str, Any] = {
        **estimate.as_dict(), "paths": n_paths, "assets": model.n, "steps": p.steps,
        "path_steps": n_paths * p.steps, "control": _control_name(model), "control_mean": model.control_mean,
        **scheme(p, sums, samples(p, n_paths), p.steps, estimate.std_error)}
    if p.greeks:
        summary["greeks"] = fd_greeks.estimate(p, no_exercise(), p.steps, n_paths, device, ctx.part(0.5, 1.0))
    return KernelResult(summary=summary, paths=n_paths)


def _control_name(model: Model) -> str:
    return "geometric basket option (closed form)" if model.mode == MODE_GBM else "discounted basket (martingale)"
