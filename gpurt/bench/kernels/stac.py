"""A STAC-A2-shaped benchmark: every Greek of an early-exercise option on a 5-asset Heston basket.

STAC-A2 (the industry's benchmark for risk platforms) times the Greeks of a multi-asset, path-dependent
option with early exercise under Heston. This case has that shape, not its exact specification: an
American-style put on an equally weighted basket of 5 correlated Heston assets, 25,000 pricing paths
and as many regression paths, 252 steps with exercise at every step (Longstaff-Schwartz,
``kernels.lsm``). "All Greeks" are 17: delta, gamma and vega (to ``sqrt(v0)``) per asset, rho and theta,
as an ``american_option`` job computes them (``kernels.fd_greeks``): central bump-and-revalue on common
random numbers, the exercise rule fitted once and kept, the same pricing paths revalued 24 times.

Cold time is the first computation in the process (numba cache load or JIT compile included); warm is
the best of later ones. The baseline is the same estimator in vectorised NumPy (``gpurt.bench.kernels.baselines``),
timed the same way in the same run. Published anchor: 0.018 s warm on 4 A100 GPUs (STAC report
NVDA221007), for the full STAC-A2 specification.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kernels import fd_greeks
from kernels.context import RunContext
from kernels.device import CPU
from kernels.params import AmericanOptionParams, Greek, HestonAssets

ASSETS: Final = 5
PATHS: Final = 25_000
STEPS: Final = 252
ALL_GREEKS: Final = list(Greek)
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


def kernel_greeks(device: str) -> Callable[[AmericanOptionParams], dict[str, float]]:
    """Price and all Greeks by the kernels: an ``american_option`` job with ``greeks`` (``kernels.fd_greeks``)."""
    from kernels import lsm

    ctx = RunContext(should_stop=lambda: False, progress=lambda _: None)

    def greeks(p: AmericanOptionParams) -> dict[str, float]:
        summary = lsm.run(p.model_copy(update={"greeks": ALL_GREEKS}), device, ctx).summary
        estimates = {Greek(name): [e["estimate"] for e in (v if isinstance(v, list) else [v])]
                     for name, v in summary["greeks"].items()}
        return {"price": summary["estimate"], **fd_greeks.flat(estimates)}

    return greeks


def baseline_greeks(xp: Any) -> Callable[[AmericanOptionParams], dict[str, float]]:
    """The same estimator in vectorised NumPy (cupy): one rule, the same bumps and differences, here of
    whole-sample means (equal to the mean of the per-path differences)."""
    from gpurt.bench.kernels import baselines

    value = baselines.basket_lsm_valuation(xp)

    def greeks(p: AmericanOptionParams) -> dict[str, float]:
        rule = baselines.basket_lsm_rule(xp, p)
        price = value(p, rule)
        plain = p.model_copy(update={"control_variate": False})  # Greeks take no control, as the kernels'
        values = {c.key: value(c.params, rule) for c in fd_greeks.bumped_cases(plain, ALL_GREEKS)}
        return {"price": price, **fd_greeks.flat(fd_greeks.differences(values, plain, ALL_GREEKS))}

    return greeks


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
    p = case(scale)
    kernel = kernel_greeks(device)
    baseline = baseline_greeks(array_module(device))
    kernel_cold, result = _timed(lambda: kernel(p))
    baseline_cold, reference = _timed(lambda: baseline(p))
    kernel_warm = baseline_warm = float("inf")
    for _ in range(WARM_REPEATS):
        kernel_warm = min(kernel_warm, _timed(lambda: kernel(p))[0])
        baseline_warm = min(baseline_warm, _timed(lambda: baseline(p))[0])
    return StacFigures(device, p.paths, kernel_cold, kernel_warm, baseline_cold, baseline_warm, result["price"],
                       reference["price"], {k: v for k, v in result.items() if k != "price"})


def array_module(device: str) -> Any:
    """NumPy on the CPU, cupy on a GPU."""
    from gpurt.bench.kernels.runner import array_module as choose

    return choose(device)


def baseline_name(device: str) -> str:
    """What the baseline runs on: the same vectorised estimator in NumPy on a CPU, in cupy on a GPU."""
    return "NumPy" if device == CPU else "cupy"


def markdown(f: StacFigures, where: str, date: str, load: str) -> str:
    """The ``kernels-stac-<device>`` section of BENCHMARKS.md."""
    baseline = baseline_name(f.device)
    hardware = "one CPU" if f.device == CPU else "one GPU"
    lines = [
        f"## STAC-A2-shaped Greeks on {f.device.upper()} — {date}",
        "",
        f"Device: {where}. All 17 Greeks (delta, gamma, vega per asset; rho; theta) of an American-style put "
        f"on a 5-asset Heston basket, {f.paths:,} pricing + {f.paths:,} regression paths, {STEPS} steps with "
        "exercise at every step (Longstaff-Schwartz), by central bump-and-revalue on common random numbers (one "
        "exercise rule, 25 valuations of the same pricing paths; the kernels also price the European). "
        f"Baseline: the same estimator in vectorised {baseline}, same run. Machine load: {load}.",
        "",
        "| | cold (first run, compile/cache load included) | warm (best of later runs) |",
        "| --- | ---: | ---: |",
        f"| kernels (`american_option`) | {f.kernel_cold_s:.2f} s | {f.kernel_warm_s:.2f} s |",
        f"| {baseline} baseline | {f.baseline_cold_s:.2f} s | {f.baseline_warm_s:.2f} s |",
        "",
        f"Warm speed-up over the baseline: {f.ratio:.1f}x. Price {f.price:.4f} (baseline {f.baseline_price:.4f}, "
        f"different random numbers). Published anchor: {ANCHOR}; this machine is "
        f"{f.kernel_warm_s / ANCHOR_S:.0f}x that time ({hardware}, not four GPUs, and not the exact specification).",
    ]
    return "\n".join(lines)
