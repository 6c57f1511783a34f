"""One descriptor per job type: everything the platform knows of a type, apart from its params and its numerics.

A job type is its params model (``kernels.params``, which names its ``JobType``), its kernel module and the
``JobDescriptor`` below. The tables that once repeated each type are read from the descriptors:

- ``kernels.registry.KERNELS``: which kernel module runs it, and whether its jobs shard;
- ``kernels.warm.WARM_JOBS``: the tiny jobs that compile its kernels before a worker's first job;
- ``runtime.scheduler.packing.is_tiny`` and ``kernels.shards.shard_count``: its ``kernels.sizes.SizeRule``;
- ``gpurt.client.plots`` and ``options``: its pictures' titles, the unit of its estimate, the picture it gives by
  default, whether its options have a Black-Scholes implied volatility;
- ``gpurt.demo.workload``: its demo job, where no study of the demo covers it;
- ``examples/<type>.json``: its example request's params (``tests/kernels/test_descriptors.py`` compares them).

This module imports only the params and the size policy, never a kernel (the kernels' import contract in
``pyproject.toml`` keeps it so): the gpu-scheduler and the Python API read it without loading numba.
docs/architecture.md, "Adding a job type", lists what a new type takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel

from kernels.params import (
    AmericanOptionParams,
    AsianOptionParams,
    BasketOptionParams,
    BookModel,
    EuropeanOptionParams,
    HestonOptionParams,
    NoopParams,
    OptionBookParams,
    PortfolioVarParams,
    RandomWalkParams,
    job_models,
)
from kernels.sizes import SizeRule, short_noop, small_european

PRICE_UNIT: Final = "price, in the spot's currency"
# Neither packed nor sharded: each job one Dask task.
ONE_TASK: Final = SizeRule()


@dataclass(frozen=True)
class WarmJob:
    """A tiny job that compiles one kernel code path (``kernels.warm``): the fewest paths its validation takes."""

    name: str  # what ``warm_kernels`` reports, unique across every type
    params: Mapping[str, Any]


def _price_unit(_: Mapping[str, Any]) -> str:
    return PRICE_UNIT


@dataclass(frozen=True)
class JobDescriptor:
    """What the platform knows of one job type besides its params' rules and its kernel's numerics."""

    params: type[BaseModel]  # its params model; the model's ``job_type`` is the type's name
    # The module that runs it (``kernels.registry.KernelModule``), by name: imported when a job runs. None for
    # noop, which ``kernels.jobs`` runs itself.
    kernel_module: str | None
    # A picture's title from the validated params and the paths it ran (``"1,000 paths"``): what the job is on the
    # first line, the model and its parameters on the second. ``varying`` names params a picture of several jobs
    # shows on an axis, which the title may leave out.
    describe: Callable[[Any, str, frozenset[str]], str]
    example: Mapping[str, Any]  # the params of examples/<type>.json
    warm: tuple[WarmJob, ...] = ()
    size: SizeRule = ONE_TASK
    # The estimate's axis label, from the result's summary.
    estimate_unit: Callable[[Mapping[str, Any]], str] = _price_unit
    plot: str = "estimate"  # the picture one result gives by default (gpurt.client.plots.SINGLE_KINDS)
    plot_many: str | None = None  # the picture several results of this type alone give by default
    # Its options pay on one underlying at maturity (Europeans): a Black-Scholes implied volatility describes them.
    implied_vol: bool = False

    @property
    def type(self) -> str:
        """The job type's name on the wire: a ``JobType`` for the platform's own types."""
        return vars(self.params)["job_type"]  # type: ignore[no-any-return]


# --- titles: the parameters named as the job's parameters are ---------------------------------------------------


def _pct(value: float) -> str:
    return f"{value * 100:.3g}%"


def money(value: float) -> str:
    """A money amount as a desk writes it: 1.25M, 830k, 2.1bn."""
    for scale, suffix in ((1e9, "bn"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def _rates(p: Any) -> str:
    return f"rate {_pct(p.rate)}, dividend yield {_pct(p.dividend_yield)}"


def _black_scholes(p: EuropeanOptionParams | AsianOptionParams | OptionBookParams) -> str:
    return f"Black-Scholes: spot {p.spot:g}, volatility {_pct(p.volatility)}, {_rates(p)}"


def _heston(p: HestonOptionParams | OptionBookParams) -> str:
    return (f"Heston: spot {p.spot:g}, initial variance {p.initial_variance:g}, long variance {p.long_variance:g}, "
            f"mean reversion {p.mean_reversion:g}, vol of vol {p.vol_of_vol:g}, correlation {p.correlation:g}, "
            f"{_rates(p)}")


def _contract(p: Any) -> str:
    return f"{p.kind.value} K={p.strike:g}, T={p.maturity:g}y"


def _basket(p: BasketOptionParams) -> str:
    spots = ", ".join(f"{s:g}" for s in p.spots)
    weights = ", ".join(f"{w:.3g}" for w in p.weights)
    vols = p.volatilities
    model = f"GBM, volatilities [{', '.join(_pct(v) for v in vols)}]" if vols else "per-asset Heston"
    return f"{len(p.spots)} asset(s), spots [{spots}], weights [{weights}]; {model}, rate {_pct(p.rate)}"


def _noop(p: NoopParams, paths: str, varying: frozenset[str]) -> str:
    return f"noop sleeping {p.sleep_s:g} s"


def _random_walk(p: RandomWalkParams, paths: str, varying: frozenset[str]) -> str:
    return f"random walk of {p.steps:,} standard normal steps, {paths}"


def _european(p: EuropeanOptionParams, paths: str, varying: frozenset[str]) -> str:
    return f"European {_contract(p)}, {paths}\n{_black_scholes(p)}"


def _asian(p: AsianOptionParams, paths: str, varying: frozenset[str]) -> str:
    return f"Asian (arithmetic average of {p.steps} fixings) {_contract(p)}, {paths}\n{_black_scholes(p)}"


def _portfolio_var(p: PortfolioVarParams, paths: str, varying: frozenset[str]) -> str:
    days = "" if "horizon_days" in varying else f"over {p.horizon_days:g} trading days, "
    return (f"{len(p.exposures)} positions, {money(sum(map(abs, p.exposures)))} gross, {days}"
            f"{p.revaluation} revaluation, {paths}")


def _heston_option(p: HestonOptionParams, paths: str, varying: frozenset[str]) -> str:
    return f"European {_contract(p)}, {p.steps} QE steps, {paths}\n{_heston(p)}"


def _basket_option(p: BasketOptionParams, paths: str, varying: frozenset[str]) -> str:
    return f"{p.payoff.capitalize()} basket {_contract(p)}, {paths}\n{_basket(p)}"


def _american(p: AmericanOptionParams, paths: str, varying: frozenset[str]) -> str:
    return f"American {_contract(p)}, {p.dates()} exercise dates, {paths}\n{_basket(p)}"


def _book(p: OptionBookParams, paths: str, varying: frozenset[str]) -> str:
    market = _heston(p) if p.model is BookModel.HESTON else _black_scholes(p)
    return f"book of {len(p.contracts)} options, {paths}\n{market}"


def _walk_unit(_: Mapping[str, Any]) -> str:
    return "mean of the paths' averages, in standard normal units"


def _var_unit(summary: Mapping[str, Any]) -> str:
    return f"VaR at {summary['var_confidence'] * 100:g}%, in the exposures' currency"


# --- the job types ---------------------------------------------------------------------------------------------

_GREEKS: Final = ["delta", "gamma", "vega", "rho", "theta"]
_BASKET: Final = {"spots": [100.0, 95.0], "weights": [0.5, 0.5], "volatilities": [0.2, 0.25],
                  "correlation": [[1.0, 0.5], [0.5, 1.0]], "strike": 100.0}
_TWO_CORRELATED: Final = [[1.0, 0.5], [0.5, 1.0]]
_HESTON_MARKET: Final = {"spot": 100, "rate": 0.03, "dividend_yield": 0.01, "initial_variance": 0.04,
                         "long_variance": 0.05, "mean_reversion": 1.5, "vol_of_vol": 0.5, "correlation": -0.7}
_THREE_ASSETS: Final = {"spots": [100, 95, 105], "weights": [0.3333, 0.3333, 0.3334],
                        "volatilities": [0.2, 0.25, 0.3], "dividend_yields": [0.01, 0.0, 0.02],
                        "correlation": [[1.0, 0.5, 0.3], [0.5, 1.0, 0.4], [0.3, 0.4, 1.0]]}

NOOP: Final = JobDescriptor(
    NoopParams, None, _noop, example={},
    # packed up to PACK_MAX_SLEEP_S: the drills' and the probe's jobs are a Dask round trip or less
    size=SizeRule(tiny=short_noop))

RANDOM_WALK: Final = JobDescriptor(
    RandomWalkParams, "kernels.random_walk", _random_walk, example={"paths": 100000, "steps": 1000, "seed": 42},
    warm=(WarmJob("random_walk", {"paths": 64, "steps": 4}),), estimate_unit=_walk_unit)

EUROPEAN_OPTION: Final = JobDescriptor(
    EuropeanOptionParams, "kernels.european", _european,
    example={"spot": 100, "strike": 100, "rate": 0.05, "volatility": 0.2, "maturity": 1.0, "kind": "call",
             "paths": 13000000, "seed": 2026},
    warm=(WarmJob("european_option", {"paths": 64}),
          WarmJob("european_option with Greeks", {"paths": 64, "greeks": _GREEKS})),
    size=SizeRule(tiny=small_european, sharded=True), implied_vol=True)

ASIAN_OPTION: Final = JobDescriptor(
    AsianOptionParams, "kernels.asian", _asian,
    example={"spot": 100, "strike": 100, "rate": 0.05, "volatility": 0.2, "maturity": 1.0, "kind": "call",
             "steps": 64, "paths": 1000000, "seed": 2026},
    warm=(WarmJob("asian_option", {"paths": 64, "steps": 4}),), size=SizeRule(sharded=True))

PORTFOLIO_VAR: Final = JobDescriptor(
    PortfolioVarParams, "kernels.portfolio_var", _portfolio_var,
    example={"exposures": [1000000, -500000, 2000000], "volatilities": [0.2, 0.3, 0.15],
             "correlation": [[1.0, 0.5, 0.2], [0.5, 1.0, 0.3], [0.2, 0.3, 1.0]], "horizon_days": 10,
             "confidence": 0.99, "revaluation": "full", "paths": 2000000, "seed": 2026},
    warm=(WarmJob("portfolio_var", {"exposures": [1.0, -1.0], "volatilities": [0.2, 0.3],
                                    "correlation": _TWO_CORRELATED, "paths": 100}),),
    size=SizeRule(sharded=True), estimate_unit=_var_unit, plot="loss", plot_many="var")

HESTON_OPTION: Final = JobDescriptor(
    HestonOptionParams, "kernels.heston", _heston_option,
    example={**_HESTON_MARKET, "strike": 100, "maturity": 1.0, "kind": "call", "steps": 128, "paths": 1000000,
             "seed": 2026, "greeks": _GREEKS},
    warm=(WarmJob("heston_option", {"paths": 64, "steps": 4}),
          WarmJob("heston_option with Greeks", {"paths": 64, "steps": 4, "greeks": _GREEKS})),
    implied_vol=True)

BASKET_OPTION: Final = JobDescriptor(
    BasketOptionParams, "kernels.basket_option", _basket_option,
    example={**_THREE_ASSETS, "strike": 100, "rate": 0.05, "maturity": 1.0, "kind": "call", "paths": 1000000,
             "seed": 2026},
    warm=(WarmJob("basket_option", {**_BASKET, "paths": 64}),
          WarmJob("basket_option with Greeks", {**_BASKET, "paths": 64, "greeks": _GREEKS})))

AMERICAN_OPTION: Final = JobDescriptor(
    AmericanOptionParams, "kernels.lsm", _american,
    example={"spots": [100], "weights": [1], "volatilities": [0.25], "strike": 100, "rate": 0.05, "maturity": 1.0,
             "kind": "put", "steps": 50, "paths": 500000, "regression_paths": 200000, "basis_degree": 3,
             "seed": 2026},
    warm=(WarmJob("american_option", {**_BASKET, "paths": 1_000, "regression_paths": 1_000, "steps": 4}),
          # one GBM asset also reports the compiled binomial tree (kernels.binomial)
          WarmJob("american_option on one asset", {"spots": [100.0], "weights": [1.0], "volatilities": [0.2],
                                                   "strike": 100.0, "paths": 1_000, "regression_paths": 1_000,
                                                   "steps": 4})))

OPTION_BOOK: Final = JobDescriptor(
    OptionBookParams, "kernels.book", _book,
    example={**_HESTON_MARKET, "model": "heston", "steps_per_year": 128,
             "contracts": [{"strike": 80, "maturity": 0.25, "kind": "put"},
                           {"strike": 90, "maturity": 0.5, "kind": "put"}, {"strike": 100, "maturity": 1.0},
                           {"strike": 110, "maturity": 1.0}, {"strike": 100, "maturity": 2.0, "kind": "put"}],
             "paths": 500000, "seed": 2026, "greeks": ["delta", "gamma", "vega"]},
    warm=(WarmJob("option_book", {"contracts": [{"strike": 100.0, "maturity": 0.5}], "paths": 64,
                                  "steps_per_year": 4}),),
    plot="smile", implied_vol=True)


def by_type(descriptors: Iterable[JobDescriptor], models: Mapping[str, type[BaseModel]]) -> dict[str, JobDescriptor]:
    """``descriptors`` by type name, checked against the params ``models`` by type (``kernels.params.job_models``):
    one descriptor for each, naming that model. Raises ``TypeError`` naming what is missing or doubled."""
    found: dict[str, JobDescriptor] = {}
    for descriptor in descriptors:
        if descriptor.type in found:
            raise TypeError(f"job type {descriptor.type} has two descriptors")
        if models.get(descriptor.type) is not descriptor.params:
            raise TypeError(f"the descriptor of {descriptor.type} names {descriptor.params.__name__}, which is not "
                            "the params model of that type")
        found[descriptor.type] = descriptor
    if missing := [job_type for job_type in models if job_type not in found]:
        raise TypeError(f"job type(s) {', '.join(missing)} have no descriptor (kernels.descriptors)")
    return {job_type: found[job_type] for job_type in models}


# Every job type's descriptor by its JobType, in JobType's order; an import fails if a type has none. Read where a
# job is handled (``descriptor_of``), so that a test can add a throwaway type in-process.
DESCRIPTORS: Final[dict[str, JobDescriptor]] = by_type(
    (NOOP, RANDOM_WALK, EUROPEAN_OPTION, ASIAN_OPTION, PORTFOLIO_VAR, HESTON_OPTION, BASKET_OPTION, AMERICAN_OPTION,
     OPTION_BOOK), job_models())


def descriptor_of(job_type: str) -> JobDescriptor:
    """The descriptor of ``job_type`` (raises ``KeyError`` for a name no job type has)."""
    return DESCRIPTORS[job_type]
