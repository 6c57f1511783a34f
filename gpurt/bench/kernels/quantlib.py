"""``gpurt bench kernels --vs-quantlib``: the American put against QuantLib's ``MCAmericanEngine`` on CPU-seconds
at equal standard error.

Both price the same American put (one GBM asset, exercise at each of the same time steps, Longstaff-Schwartz
with a cubic polynomial basis and the same number of regression paths) in this process, one after the
other, and each is timed by ``time.process_time`` (CPU-seconds of every thread: a parallel kernel on two
cores is charged for both). Each side runs each of the same variance-reduction settings (antithetic
variates, its control variate, both) and keeps its most efficient one (least CPU-seconds x SE^2); the
kernel's path count is then chosen from that pilot run so that its standard error equals QuantLib's.
Monte Carlo cost grows as ``1 / SE^2``, so a run whose error is above the common one is charged its
CPU-seconds scaled up to it (``cpu_at``); a run whose error is already below it (the kernel at its fewest
paths) is charged what it took: its regression does not shrink with the pricing paths. The ratio is
QuantLib's CPU-seconds over the kernel's at QuantLib's standard error. QuantLib is a development
dependency: the comparison needs it installed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Final

from kernels.jobs import run_job
from kernels.params import AmericanOptionParams, JobType

# The case: an at-the-money American put, exercisable at each of 50 steps (the job's default dates); each
# side's variance-reduction settings are the bench's choice (SETTINGS), not the case's.
CASE: Final = AmericanOptionParams(spots=[100.0], weights=[1.0], volatilities=[0.25], strike=100.0, rate=0.05,
                                   maturity=1.0, kind="put", steps=50, paths=200_000, regression_paths=50_000,
                                   antithetic=True, seed=2026)
BASIS_DEGREE: Final = 3  # the job's default polynomial degree, and QuantLib's polynomOrder
QUANTLIB_SEED: Final = 42
# The settings each side tries: (antithetic variates, control variate). QuantLib's control is the European
# payoff at maturity with its analytic price; the kernel's, for the American, the European valued in
# closed form at the exercise date (kernels.basket), the European at maturity on paths never exercised.
SETTINGS: Final = ((True, False), (True, True), (False, True))
KERNEL_REPEATS: Final = 2  # the best of this many timed runs (after a warm-up that takes the JIT compile)
PILOT_SHARE: Final = 0.1  # the kernel's pilot runs price this share of the case's paths
MIN_KERNEL_PATHS: Final = 2_000  # fewest pricing paths the kernel is timed on (a stable standard error)


@dataclass(frozen=True)
class EngineRun:
    """One timed pricing: what ran, its estimate and standard error, and its CPU and wall seconds."""

    engine: str
    paths: int
    estimate: float
    std_error: float
    cpu_s: float
    wall_s: float

    def cpu_at(self, std_error: float) -> float:
        """CPU-seconds charged for ``std_error``: scaled up as 1 / SE^2 from a larger error, never down from a
        smaller one (fixed costs, such as the regression, do not shrink with the pricing paths)."""
        return self.cpu_s * max(1.0, (self.std_error / std_error) ** 2)

    @property
    def efficiency(self) -> float:
        """CPU-seconds x SE^2: the lower, the less a given error costs (how each side's setting is picked)."""
        return self.cpu_s * self.std_error**2


@dataclass(frozen=True)
class Comparison:
    """The kernel against QuantLib's best setting, and every QuantLib setting tried."""

    kernel: EngineRun
    quantlib: EngineRun
    tried: list[EngineRun]
    regression_paths: int
    kernel_tried: list[EngineRun]  # the kernel's pilot runs, one per setting

    @property
    def runs(self) -> list[EngineRun]:
        """Every timed run, in the order the tables show them: the kernel's, its pilots, QuantLib's."""
        return [self.kernel, *self.kernel_tried, *self.tried]

    @property
    def ratio(self) -> float:
        """QuantLib's CPU-seconds over the kernel's at QuantLib's standard error."""
        target = self.quantlib.std_error
        return self.quantlib.cpu_at(target) / self.kernel.cpu_at(target)


def _timed(fn: Any) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.process_time() - cpu, time.perf_counter() - wall


def _quantlib() -> Any:
    try:
        import QuantLib as ql
    except ImportError:
        raise RuntimeError("the comparison needs QuantLib, a development dependency: run `uv sync` "
                           "(or `pip install QuantLib`)") from None
    return ql


def quantlib_run(p: AmericanOptionParams, samples: int, antithetic: bool, control: bool) -> EngineRun:
    """``p`` priced by QuantLib's ``MCAmericanEngine`` with ``samples`` samples (pairs when antithetic)."""
    ql = _quantlib()
    today = ql.Date(2, 1, 2026)
    ql.Settings.instance().evaluationDate = today
    day_count = ql.Actual365Fixed()

    def flat(rate: float) -> Any:
        return ql.YieldTermStructureHandle(ql.FlatForward(today, rate, day_count, ql.Continuous))

    assert p.volatilities is not None  # a GBM case
    volatility = ql.BlackVolTermStructureHandle(ql.BlackConstantVol(today, ql.NullCalendar(), p.volatilities[0],
                                                                    day_count))
    process = ql.BlackScholesMertonProcess(ql.QuoteHandle(ql.SimpleQuote(p.spots[0])), flat(p.yields()[0]),
                                           flat(p.rate), volatility)
    kind = ql.Option.Call if p.kind.value == "call" else ql.Option.Put
    # Actual/365 from the evaluation date: a one-year maturity is 365 days
    option = ql.VanillaOption(ql.PlainVanillaPayoff(kind, p.strike),
                              ql.AmericanExercise(today, today + round(365 * p.maturity)))
    option.setPricingEngine(ql.MCAmericanEngine(
        process, "pseudorandom", timeSteps=p.steps, antitheticVariate=antithetic, controlVariate=control,
        requiredSamples=samples, seed=QUANTLIB_SEED, polynomOrder=BASIS_DEGREE,
        polynomType=ql.LsmBasisSystem.Monomial, nCalibrationSamples=p.regression_paths))
    price, cpu, wall = _timed(option.NPV)
    name = f"QuantLib MCAmericanEngine ({_settings_name(antithetic, control)})"
    return EngineRun(name, samples * (2 if antithetic else 1), float(price), float(option.errorEstimate()),
                     cpu, wall)


def _settings_name(antithetic: bool, control: bool) -> str:
    return ", ".join((["antithetic"] if antithetic else []) + (["control variate"] if control else []))


def kernel_run(p: AmericanOptionParams, repeats: int = KERNEL_REPEATS) -> EngineRun:
    """``p`` priced by the ``american_option`` job (end to end through ``run_job``), best of ``repeats``."""
    best: EngineRun | None = None
    name = f"american_option (CPU twin, {_settings_name(p.antithetic, p.control_variate)})"
    for _ in range(repeats):
        out, cpu, wall = _timed(lambda: run_job(JobType.AMERICAN_OPTION, p, device="cpu"))
        run = EngineRun(name, out.paths, out.summary["estimate"], out.summary["std_error"], cpu, wall)
        best = run if best is None or run.cpu_s < best.cpu_s else best
    assert best is not None
    return best


def compare(scale: float = 1.0) -> Comparison:
    """Run each side's settings, keep each side's most efficient, and time the kernel at QuantLib's error."""
    p = CASE.model_copy(update={"paths": max(MIN_KERNEL_PATHS, int(CASE.paths * scale)),
                                "regression_paths": max(1_000, int(CASE.regression_paths * scale))})
    tried = [quantlib_run(p, p.paths // 2 if antithetic else p.paths, antithetic, control)
             for antithetic, control in SETTINGS]
    best = min(tried, key=lambda r: r.efficiency)
    run_job(JobType.AMERICAN_OPTION, p.model_copy(update={"paths": 2_000}), device="cpu")  # JIT compile, untimed
    pilot_paths = max(MIN_KERNEL_PATHS, int(p.paths * PILOT_SHARE))
    pilots = [kernel_run(p.model_copy(update={"paths": pilot_paths, "antithetic": antithetic,
                                              "control_variate": control}), repeats=1)
              for antithetic, control in SETTINGS]
    chosen = min(range(len(SETTINGS)), key=lambda i: pilots[i].efficiency)
    antithetic, control = SETTINGS[chosen]
    paths = max(MIN_KERNEL_PATHS, math.ceil(pilot_paths * (pilots[chosen].std_error / best.std_error) ** 2))
    kernel = kernel_run(p.model_copy(update={"paths": paths, "antithetic": antithetic, "control_variate": control}))
    return Comparison(kernel, best, tried, p.regression_paths, pilots)


def markdown(c: Comparison, where: str, date: str, load: str) -> str:
    """The ``kernels-vs-quantlib-cpu`` section of BENCHMARKS.md."""
    p = CASE
    target = c.quantlib.std_error
    lines = [
        f"## American put against QuantLib on CPU — {date}",
        "",
        f"Device: {where}. American put S = K = {p.spots[0]:g}, r = {p.rate:g}, sigma = {p.volatilities[0]:g}, "
        f"T = {p.maturity:g}, exercise at each of {p.steps} steps, Longstaff-Schwartz with a cubic basis and "
        f"{c.regression_paths:,} regression paths on both sides. CPU-seconds by `time.process_time` "
        "(every thread), end to end: the kernel's job includes its regression, its European on the same paths "
        "(each walked on to maturity) and its binomial reference. Each side tried the same settings (antithetic, "
        "control variate, both) and kept its most efficient (least CPU s x SE^2; the kernel's from pilots of "
        f"{c.kernel_tried[0].paths:,} paths). QuantLib's control is the European payoff at maturity; the "
        "kernel's is the European valued in closed form at the exercise date (at maturity on paths never "
        "exercised). The kernel's paths were chosen for QuantLib's standard error (at least "
        f"{MIN_KERNEL_PATHS:,}); a run is charged its CPU s scaled as 1 / SE^2 up to that error, never down. "
        "Machine load: " + load + ".",
        "",
        "| engine | paths | estimate | std error | CPU s | wall s | CPU s at equal SE |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in c.runs:
        lines.append(f"| {run.engine} | {run.paths:,} | {run.estimate:.4f} | {run.std_error:.4f} | "
                     f"{run.cpu_s:.2f} | {run.wall_s:.2f} | {run.cpu_at(target):.2f} |")
    lines += ["", f"CPU-seconds at equal standard error ({target:.4f}): QuantLib / kernel = {c.ratio:.1f}x."]
    return "\n".join(lines)
