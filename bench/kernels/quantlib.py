"""``gpurt bench kernels --vs-quantlib``: the American put against QuantLib's ``MCAmericanEngine`` on CPU-seconds
at equal standard error.

Both price the same American put (one GBM asset, exercise at each of the same time steps, Longstaff-Schwartz
with a cubic polynomial basis and the same number of regression paths) in this process, one after the
other, and each is timed by ``time.process_time`` (CPU-seconds of every thread: a parallel kernel on two
cores is charged for both). QuantLib runs with each of its variance-reduction settings (antithetic
variates, its control variate, both) and the most efficient one is kept; the kernel's path count is then
chosen from a pilot run so that its standard error equals QuantLib's. Monte Carlo cost grows as
``1 / SE^2``, so the small remaining difference in standard errors is corrected by scaling each side's
CPU-seconds to the common standard error (``cpu_at``); the ratio is QuantLib's CPU-seconds over the
kernel's at that error. QuantLib is a development dependency: the comparison needs it installed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Final

from kernels.jobs import run_job
from protocol.params import AmericanOptionParams, JobType

# The case: an at-the-money American put, exercisable at each of 50 steps (the job's default dates), priced
# on antithetic pairs with the control (the job's most efficient setting, as QuantLib gets its own).
CASE: Final = AmericanOptionParams(spots=[100.0], weights=[1.0], volatilities=[0.25], strike=100.0, rate=0.05,
                                   maturity=1.0, kind="put", steps=50, paths=200_000, regression_paths=50_000,
                                   antithetic=True, seed=2026)
BASIS_DEGREE: Final = 3  # the job's default polynomial degree, and QuantLib's polynomOrder
QUANTLIB_SEED: Final = 42
# QuantLib's settings tried: (antithetic variates, control variate).
QUANTLIB_SETTINGS: Final = ((True, False), (True, True), (False, True))
KERNEL_REPEATS: Final = 2  # the best of this many timed runs (after a warm-up that takes the JIT compile)


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
        """CPU-seconds this engine would need for ``std_error`` (cost grows as 1 / SE^2)."""
        return self.cpu_s * (self.std_error / std_error) ** 2


@dataclass(frozen=True)
class Comparison:
    """The kernel against QuantLib's best setting, and every QuantLib setting tried."""

    kernel: EngineRun
    quantlib: EngineRun
    tried: list[EngineRun]
    regression_paths: int

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
    name = "QuantLib MCAmericanEngine (" + ", ".join(
        (["antithetic"] if antithetic else []) + (["control variate"] if control else [])) + ")"
    return EngineRun(name, samples * (2 if antithetic else 1), float(price), float(option.errorEstimate()),
                     cpu, wall)


def kernel_run(p: AmericanOptionParams, repeats: int = KERNEL_REPEATS) -> EngineRun:
    """``p`` priced by the ``american_option`` job (end to end through ``run_job``), best of ``repeats``."""
    best: EngineRun | None = None
    for _ in range(repeats):
        out, cpu, wall = _timed(lambda: run_job(JobType.AMERICAN_OPTION, p, device="cpu"))
        run = EngineRun("american_option (CPU twin)", out.paths, out.summary["estimate"],
                        out.summary["std_error"], cpu, wall)
        best = run if best is None or run.cpu_s < best.cpu_s else best
    assert best is not None
    return best


def compare(scale: float = 1.0) -> Comparison:
    """Run QuantLib's settings, keep its most efficient, and time the kernel at that standard error."""
    p = CASE.model_copy(update={"paths": max(2_000, int(CASE.paths * scale)),
                                "regression_paths": max(1_000, int(CASE.regression_paths * scale))})
    tried = [quantlib_run(p, p.paths // 2 if antithetic else p.paths, antithetic, control)
             for antithetic, control in QUANTLIB_SETTINGS]
    best = min(tried, key=lambda r: r.cpu_s * r.std_error**2)
    run_job(JobType.AMERICAN_OPTION, p.model_copy(update={"paths": 2_000}), device="cpu")  # JIT compile, untimed
    pilot = kernel_run(p, repeats=1)
    paths = max(2_000, math.ceil(p.paths * (pilot.std_error / best.std_error) ** 2))
    kernel = kernel_run(p.model_copy(update={"paths": paths}))
    return Comparison(kernel, best, tried, p.regression_paths)


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
        "(every thread), end to end (the kernel's job includes its regression, its European on the same paths "
        "and its binomial reference); QuantLib's most efficient setting of those tried; the kernel's paths "
        "chosen for QuantLib's standard error. Machine load: " + load + ".",
        "",
        "| engine | paths | estimate | std error | CPU s | wall s | CPU s at equal SE |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for run in [c.kernel, *c.tried]:
        lines.append(f"| {run.engine} | {run.paths:,} | {run.estimate:.4f} | {run.std_error:.4f} | "
                     f"{run.cpu_s:.2f} | {run.wall_s:.2f} | {run.cpu_at(target):.2f} |")
    lines += ["", f"CPU-seconds at equal standard error ({target:.4f}): QuantLib / kernel = {c.ratio:.1f}x."]
    return "\n".join(lines)
