"""A STAC-A2-shaped benchmark: every Greek of an early-exercise option on a 5-asset Heston basket.

STAC-A2 (the industry's benchmark for risk platforms) times the Greeks of a multi-asset, path-dependent
option with early exercise under Heston. This case has that shape, not its exact specification: an
American-style put on an equally weighted basket of 5 correlated Heston assets, 25,000 pricing paths
and as many regression paths, 252 steps with exercise at every step (Longstaff-Schwartz,
``kernels.lsm``). "All Greeks" are 17: delta, gamma and vega (to ``sqrt(v0)``) per asset, rho and theta,
each by central bump-and-revalue on common random numbers (every revaluation re-fits the exercise rule
on the same regression paths and prices on the same pricing paths): 25 valuations in all.

Cold time is the first computation in the process (numba cache load or JIT compile included); warm is
the best of later ones. The baseline is the same estimator in vectorised NumPy (``kernels.baselines``),
timed the same way in the same run. Published anchor: 0.018 s warm on 4 A100 GPUs (STAC report
NVDA221007), for the full STAC-A2 specification.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kernels.context import RunContext
from kernels.device import CPU
from kernels.params import AmericanOptionParams, HestonAssets

ASSETS: Final = 5
PATHS: Final = 25_000
STEPS: Final = 252
# Relative bumps: spot 1% (delta, gamma), initial volatility 1%, rate 1e-4 absolute, maturity 1 step.
SPOT_BUMP: Final = 0.01
VOL_BUMP: Final = 0.01
RATE_BUMP: Final = 1e-4
WARM_REPEATS: Final = 1
ANCHOR_S: Final = 0.018
ANCHOR: Final = "0.018 s warm on 4 A100 GPUs (STAC report NVDA221007, full STAC-A2 specification)"


def case(scale: float = 1.0) -> AmericanOptionParams:
    """The option: paths shrink with ``scale`` (tests use tiny sizes), the shape stays."""
    paths = max(1_000, int(PATHS * scale))
    correlation = [[1.0 if i == j else 0.5 for j in range(ASSETS)] for i in range(ASSETS)]
    heston = HestonAssets(initial_variance=[0.04, 0.05, 0.06, 0.03, 0.045],
                          long_variance=[0.04, 0.05, 0.05, 0.04, 0.04], mean_reversion=[1.5, 1.0, 2.0, 1.2, 1.8],
                          vol_of_vol=[0.4, 0.5, 0.6, 0.3, 0.45], correlation=[-0.7, -0.6, -0.5, -0.65, -0.55])
    return AmericanOptionParams(
        spots=[100.0, 95.0, 105.0, 90.0, 110.0], weights=[1.0 / ASSETS] * ASSETS, model="heston", heston=heston,
        correlation=correlation, dividend_yields=[0.01] * ASSETS, strike=100.0, rate=0.03, maturity=1.0, kind="put",
        steps=STEPS, exercise_dates=STEPS, paths=paths, regression_paths=paths, seed=2026)


def bumped_cases(p: AmericanOptionParams) -> list[tuple[str, int, AmericanOptionParams]]:
    """Every revaluation: (Greek, sign +1/-1/0, params); sign 0 is the base valuation."""
    h = p.heston
    assert h is not None  # the case is a Heston basket
    cases: list[tuple[str, int, AmericanOptionParams]] = [("price", 0, p)]
    for i in range(ASSETS):
        for sign in (1, -1):
            spots = list(p.spots)
            spots[i] *= 1 + sign * SPOT_BUMP
            cases.append((f"spot{i}", sign, p.model_copy(update={"spots": spots})))
            variances = list(h.initial_variance)
            variances[i] = (variances[i] ** 0.5 * (1 + sign * VOL_BUMP)) ** 2
            cases.append((f"vega{i}", sign, p.model_copy(
                update={"heston": h.model_copy(update={"initial_variance": variances})})))
    for sign in (1, -1):
        cases.append(("rho", sign, p.model_copy(update={"rate": p.rate + sign * RATE_BUMP})))
        maturity = p.maturity * (1 + sign / p.steps)
        cases.append(("theta", sign, p.model_copy(update={"maturity": maturity})))
    return cases


def greeks(values: dict[tuple[str, int], float], p: AmericanOptionParams) -> dict[str, float]:
    """The 17 Greeks by central differences of the valuations."""
    h = p.heston
    assert h is not None
    base = values[("price", 0)]
    out: dict[str, float] = {}
    for i in range(ASSETS):
        up, down = values[(f"spot{i}", 1)], values[(f"spot{i}", -1)]
        step = p.spots[i] * SPOT_BUMP
        out[f"delta_{i}"] = (up - down) / (2 * step)
        out[f"gamma_{i}"] = (up - 2 * base + down) / step**2
        vol_step = h.initial_variance[i] ** 0.5 * VOL_BUMP
        out[f"vega_{i}"] = (values[(f"vega{i}", 1)] - values[(f"vega{i}", -1)]) / (2 * vol_step)
    out["rho"] = (values[("rho", 1)] - values[("rho", -1)]) / (2 * RATE_BUMP)
    out["theta"] = -(values[("theta", 1)] - values[("theta", -1)]) / (2 * p.maturity / p.steps)
    return out


def kernel_valuation(device: str) -> Callable[[AmericanOptionParams], float]:
    """One valuation by the kernels (what a worker runs for an ``american_option`` job)."""
    from kernels import basket, estimators, lsm

    ctx = RunContext(should_stop=lambda: False, progress=lambda _: None)

    def value(p: AmericanOptionParams) -> float:
        model = basket.Model.of(p)
        every = p.steps // p.dates()
        values = basket.basket_values(p, model, p.regression_paths, every, p.dates(), device, ctx)
        rule = lsm.exercise_rule(values, p)
        sums = basket.discounted_sums(p, model, rule, every, p.paths, device, ctx)
        return estimators.from_sums(sums, p.paths, control_variate=p.control_variate).estimate

    return value


def all_greeks(value: Callable[[AmericanOptionParams], float], p: AmericanOptionParams) -> dict[str, float]:
    """Price and the 17 Greeks of ``p`` with the valuation function ``value``."""
    values = {(name, sign): value(q) for name, sign, q in bumped_cases(p)}
    return {"price": values[("price", 0)], **greeks(values, p)}


@dataclass(frozen=True)
class StacFigures:
    """Cold and warm seconds for all Greeks, kernel and baseline, measured in the same run."""

    device: str
    paths: int
    kernel_cold_s: float
    kernel_warm_s: float
    baseline_cold_s: float
    baseline_warm_s: float
    price: float
    baseline_price: float
    greeks: dict[str, float]

    @property
    def ratio(self) -> float:
        """Warm speed-up of the kernels over the baseline."""
        return self.baseline_warm_s / self.kernel_warm_s


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def measure(device: str = CPU, scale: float = 1.0) -> StacFigures:
    """Time all Greeks, cold then warm, by the kernels and by the NumPy baseline."""
    from kernels import baselines

    p = case(scale)
    kernel = kernel_valuation(device)
    baseline = baselines.basket_lsm_valuation(array_module(device))
    kernel_cold, result = _timed(lambda: all_greeks(kernel, p))
    baseline_cold, reference = _timed(lambda: all_greeks(baseline, p))
    kernel_warm = baseline_warm = float("inf")
    for _ in range(WARM_REPEATS):
        kernel_warm = min(kernel_warm, _timed(lambda: all_greeks(kernel, p))[0])
        baseline_warm = min(baseline_warm, _timed(lambda: all_greeks(baseline, p))[0])
    return StacFigures(device, p.paths, kernel_cold, kernel_warm, baseline_cold, baseline_warm, result["price"],
                       reference["price"], {k: v for k, v in result.items() if k != "price"})


def array_module(device: str) -> Any:
    """NumPy on the CPU, cupy on a GPU."""
    from kernels.bench import array_module as choose

    return choose(device)


def markdown(f: StacFigures, where: str, date: str, load: str) -> str:
    """The ``kernels-stac-<device>`` section of BENCHMARKS.md."""
    lines = [
        f"## STAC-A2-shaped Greeks on {f.device.upper()} — {date}",
        "",
        f"Device: {where}. All 17 Greeks (delta, gamma, vega per asset; rho; theta) of an American-style put "
        f"on a 5-asset Heston basket, {f.paths:,} pricing + {f.paths:,} regression paths, {STEPS} steps with "
        "exercise at every step (Longstaff-Schwartz), by 25 bump-and-revalue valuations on common random numbers. "
        f"Baseline: the same estimator in vectorised NumPy, same run. Machine load: {load}.",
        "",
        "| | cold (first run, compile/cache load included) | warm (best of later runs) |",
        "| --- | ---: | ---: |",
        f"| kernels (`american_option`) | {f.kernel_cold_s:.2f} s | {f.kernel_warm_s:.2f} s |",
        f"| NumPy baseline | {f.baseline_cold_s:.2f} s | {f.baseline_warm_s:.2f} s |",
        "",
        f"Warm speed-up over the baseline: {f.ratio:.1f}x. Price {f.price:.4f} (baseline {f.baseline_price:.4f}, "
        f"different random numbers). Published anchor: {ANCHOR}; this machine is "
        f"{f.kernel_warm_s / ANCHOR_S:.0f}x that time (a CPU, not four GPUs, and not the exact specification).",
    ]
    return "\n".join(lines)
