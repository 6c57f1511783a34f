"""Parameters of each job type, with the limits that keep one job inside one GPU's budget.

These pydantic models are the job protocol's ``params``: the scheduler validates an incoming request
with them, the kernels run from them. A bad or oversized parameter is a clear ``ValidationError``.
"""

from __future__ import annotations

import functools
import math
import numbers
import operator
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, Strict, model_validator

# Limits: large enough for the accuracy SLO (1.3e7 paths on the reference call), small enough that a
# single request cannot monopolise a GPU for hours.
MAX_PATHS: Final = 2_000_000_000
MAX_STEPS: Final = 10_000
MAX_PATH_STEPS: Final = 50_000_000_000  # paths x steps for path-dependent kernels
MAX_ASSETS: Final = 256
MAX_SLEEP_S: Final = 3_600.0
# VaR keeps one float64 loss per scenario on the host to take quantiles: 25e6 scenarios = 200 MB.
MAX_VAR_PATHS: Final = 25_000_000
# Below this a tail quantile and its interval are not worth reporting.
MIN_VAR_PATHS: Final = 100
# Baskets: a path carries its assets' state in registers/local memory (16 x 3 floats per thread on a GPU).
MAX_BASKET_ASSETS: Final = 16
# Longstaff-Schwartz keeps the regression paths' basket values at every exercise date on the host
# (float64): at most 5e7 values, 400 MB.
MAX_EXERCISE_DATES: Final = 256
MIN_REGRESSION_PATHS: Final = 1_000
MAX_REGRESSION_PATHS: Final = 1_000_000
MAX_REGRESSION_VALUES: Final = 50_000_000
MAX_BASIS_DEGREE: Final = 6
# A book's contracts are priced from the same paths in one launch; each GPU thread keeps every contract's
# running sums (15 doubles each with Greeks) in local memory.
MAX_BOOK_CONTRACTS: Final = 64
# QE steps of a Heston basket when the request gives none (GBM baskets step exactly, one step).
HESTON_BASKET_STEPS: Final = 64
# Basket and Longstaff-Schwartz Greeks keep every revaluation's per-path cash flows on the host (float64):
# up to 1 + 4 x 16 + 4 revaluations of 2e6 paths, about 1.1 GB at the largest basket.
MAX_FD_GREEK_PATHS: Final = 2_000_000
# VaR horizons are in trading days; annualised volatilities scale with sqrt(days / 252).
TRADING_DAYS_PER_YEAR: Final = 252
# Smallest values an option kernel can price. Per-path arithmetic is float32 (24-bit significand,
# smallest normal 1.2e-38), and the estimators and references divide by volatility x sqrt(step), by the
# spot squared (gamma) and by the Heston vol of vol squared (the semi-analytic price): a positive value
# far below these floors raised ZeroDivisionError or came back as inf/NaN. At the floors the option is
# already worth its discounted intrinsic value to float32 precision, so nothing a desk prices is refused.
MIN_PRICE: Final = 1e-3  # spots and strikes, in the currency's units
MIN_VOLATILITY: Final = 1e-3  # 0.1% a year
MIN_MATURITY: Final = 1e-3  # years: about 9 hours
MIN_VARIANCE: Final = 1e-6  # Heston variances: a volatility of 0.1%
MIN_VOL_OF_VOL: Final = 1e-3
MIN_WEIGHT: Final = 1e-6  # basket weights, in absolute value


# float32's range, in natural logs: the largest finite value (3.4e38) and the smallest normal one (1.2e-38;
# kernels built with fastmath flush smaller ones to zero).
FLOAT32_LOG_MAX: Final = math.log(3.4028234663852886e38)
FLOAT32_LOG_MIN: Final = math.log(1.1754943508222875e-38)
# The farthest a path's normal draw goes: Box-Muller of a uniform floored at 2**-33 (kernels.philox).
NORMAL_DRAW_MAX: Final = math.sqrt(-2.0 * math.log(2.0**-33))
# The largest |x| the kernels' float32 exp takes before clamping (kernels.special.exp32).
EXP32_LIMIT: Final = 87.0


class JobType(StrEnum):
    """The job types of the protocol."""

    NOOP = "noop"
    RANDOM_WALK = "random_walk"
    EUROPEAN_OPTION = "european_option"
    ASIAN_OPTION = "asian_option"
    PORTFOLIO_VAR = "portfolio_var"
    HESTON_OPTION = "heston_option"
    BASKET_OPTION = "basket_option"
    AMERICAN_OPTION = "american_option"
    OPTION_BOOK = "option_book"


def _whole(value: object) -> object:
    """An integral number as an ``int`` (``1e6`` from ``gpurt submit -p paths=1e6``, numpy's integers); anything
    else unchanged, for strict validation to refuse (a bool, a string, ``1.5``)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    return value


# An integer a user writes: a JSON integer, or a number with nothing after the point, and nothing else. Strict
# mode alone would refuse the ``1e6`` users write for paths; lax mode took ``true`` for 1 and ``" 1_000 "``
# for 1000 (issue 43).
Integer = Annotated[int, BeforeValidator(_whole)]
# An enum's field arrives as its value, a JSON string: strict mode would take only the Python enum member.
# Lax on that field alone accepts exactly the members' values, nothing coerced.
BY_VALUE: Final = Strict(False)


class _Params(BaseModel):
    # NaN and infinities are refused in every float field, a list's entries included: pydantic takes the
    # strings "NaN" and "Infinity" for floats, and a bound such as ``le`` only guards a scalar.
    # Strict: a number is a JSON number (an int may stand for a float), a flag a JSON boolean, a name a string;
    # lax mode took `"yes"` for true and `true` for 1 path (issue 43). Enums are lax (``BY_VALUE``), ints ``Integer``.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)


def below_floor(minimum: float, why: str) -> str:
    """The refusal of a value below ``minimum`` (``why`` says what breaks there)."""
    return f"must be at least {minimum:g} ({why})"


_PRICE_WHY = "spot and strike enter float32 paths and gamma divides by the spot squared"
_VOL_WHY = "the estimators and closed forms divide by volatility x sqrt(time)"
_VARIANCE_WHY = "the Heston gamma divides by sqrt(variance x step)"
_VOL_OF_VOL_WHY = "the semi-analytic Heston price divides by the vol of vol squared"


def _floor(minimum: float, why: str) -> AfterValidator:
    def check(value: float) -> float:
        if value < minimum:
            raise ValueError(below_floor(minimum, why))
        return value

    return AfterValidator(check)


Price = Annotated[float, Field(le=1e9), _floor(MIN_PRICE, _PRICE_WHY)]
Volatility = Annotated[float, Field(le=5.0, description="Annualised lognormal volatility."),
                       _floor(MIN_VOLATILITY, _VOL_WHY)]
Maturity = Annotated[float, Field(le=100.0, description="Years to expiry."), _floor(MIN_MATURITY, _VOL_WHY)]
Variance = Annotated[float, Field(le=4.0), _floor(MIN_VARIANCE, _VARIANCE_WHY)]
VolOfVol = Annotated[float, Field(le=5.0), _floor(MIN_VOL_OF_VOL, _VOL_OF_VOL_WHY)]


def _as_list(value: object) -> object:
    """A tuple or a numpy array from a Python caller (``gpurt.client``) as a list; anything else unchanged. JSON
    only ever gives lists; strict mode would refuse these, which lax mode took."""
    if isinstance(value, tuple):
        return list(value)
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) and not isinstance(value, (str, bytes, dict)) else value


def vector(max_items: int, description: str | None = None) -> Any:
    """A list of floats of 1 to ``max_items`` entries: one per asset a kernel can take. A long list is one short
    refusal (pydantic stops at the length), and so is a list of bad entries (``fail_fast``: the first one),
    instead of one error per entry."""
    return Annotated[list[float], Field(min_length=1, max_length=max_items, fail_fast=True, description=description),
                     BeforeValidator(_as_list)]


def matrix(size: int, description: str | None = None) -> Any:
    """A square matrix of at most ``size`` x ``size`` floats, both dimensions bounded (see ``vector``)."""
    row = Annotated[list[float], Field(max_length=size, fail_fast=True), BeforeValidator(_as_list)]
    return Annotated[list[row], Field(max_length=size, fail_fast=True, description=description),  # type: ignore[valid-type]
                     BeforeValidator(_as_list)]


Seed = Annotated[Integer, Field(ge=0, lt=2**63, description="Random seed; same seed, same result.")]
Paths = Annotated[Integer, Field(ge=1, le=MAX_PATHS, description="Monte Carlo paths (scenarios).")]


class NoopParams(_Params):
    """The drill job: sleeps, optionally fails, touches no GPU."""

    job_type: ClassVar[JobType] = JobType.NOOP

    sleep_s: float = Field(0.0, ge=0.0, le=MAX_SLEEP_S, description="Seconds to sleep (cancellable).")
    fail: Literal["transient", "permanent"] | None = Field(
        None, description="Simulate a failure: transient is retried by redelivery, permanent is not."
    )


Confidence = Annotated[float, Field(ge=0.5, le=0.9999, description=(
    "Two-sided confidence of the reported interval (ci_low, ci_high)."))]
DEFAULT_CONFIDENCE: Final = 0.99  # the accuracy SLO is stated at 99%


class RandomWalkParams(_Params):
    """The platform's smoke-test random walk: each path averages ``steps`` standard normal increments."""

    job_type: ClassVar[JobType] = JobType.RANDOM_WALK

    paths: Paths = 1_000_000
    steps: Integer = Field(1_000, ge=1, le=MAX_STEPS)
    seed: Seed = 42
    confidence: Confidence = DEFAULT_CONFIDENCE

    @model_validator(mode="after")
    def _bounded_work(self) -> RandomWalkParams:
        _check_path_steps(self.paths, self.steps)
        return self


class OptionKind(StrEnum):
    CALL = "call"
    PUT = "put"


class Greek(StrEnum):
    """Sensitivities a job can ask for: to spot (delta, gamma), volatility, rate, and time (theta, per year)."""

    DELTA = "delta"
    GAMMA = "gamma"
    VEGA = "vega"
    RHO = "rho"
    THETA = "theta"


def _distinct(greeks: list[Greek]) -> list[Greek]:
    if len(set(greeks)) != len(greeks):
        raise ValueError("greeks must not repeat")
    return greeks


Greeks = Annotated[list[Annotated[Greek, BY_VALUE]], Field(max_length=len(Greek), description=(
    "Greeks to estimate with the price, each with its standard error (see docs/kernels.md for the method).")),
    AfterValidator(_distinct)]


class _ContractParams(_Params):
    spot: Price = 100.0
    strike: Price = 100.0
    rate: float = Field(0.05, ge=-1.0, le=1.0, description="Continuously compounded risk-free rate.")
    dividend_yield: float = Field(0.0, ge=-1.0, le=1.0, description="Continuous dividend (or repo) yield.")
    maturity: Maturity = 1.0
    kind: Annotated[OptionKind, BY_VALUE] = OptionKind.CALL
    paths: Paths = 1_000_000
    seed: Seed = 42
    control_variate: bool = True
    confidence: Confidence = DEFAULT_CONFIDENCE
    greeks: Greeks = []


class _OptionParams(_ContractParams):
    volatility: Volatility = 0.2

    @model_validator(mode="after")
    def _in_float32_range(self) -> _OptionParams:
        check_float32_paths(spot=self.spot, strike=self.strike, rate=self.rate, carry=self.dividend_yield,
                            maturity=self.maturity, volatility=self.volatility)
        return self


class EuropeanOptionParams(_OptionParams):
    """A European option under geometric Brownian motion."""

    job_type: ClassVar[JobType] = JobType.EUROPEAN_OPTION

    antithetic: bool = True


class AsianOptionParams(_OptionParams):
    """An arithmetic-average Asian option, monitored at ``steps`` equally spaced dates."""

    job_type: ClassVar[JobType] = JobType.ASIAN_OPTION

    steps: Integer = Field(64, ge=1, le=MAX_STEPS)

    @model_validator(mode="after")
    def _bounded_work(self) -> AsianOptionParams:
        _check_path_steps(self.paths, self.steps)
        return self


class HestonOptionParams(_ContractParams):
    """A European option under the Heston stochastic-volatility model, simulated with ``steps`` steps.

    ``dS = (r - q) S dt + sqrt(v) S dW1``, ``dv = mean_reversion (long_variance - v) dt + vol_of_vol sqrt(v) dW2``,
    ``d<W1, W2> = correlation dt``. Variances, not volatilities: ``initial_variance`` 0.04 is 20% vol.
    """

    job_type: ClassVar[JobType] = JobType.HESTON_OPTION

    initial_variance: Variance = 0.04
    long_variance: Variance = 0.04
    mean_reversion: float = Field(1.5, gt=0, le=50.0, description="Speed kappa, per year.")
    vol_of_vol: VolOfVol = 0.5
    correlation: float = Field(-0.7, ge=-1.0, le=1.0, description="Of the price and variance shocks.")
    steps: Integer = Field(128, ge=1, le=MAX_STEPS, description=(
        "QE steps to maturity; an even count also reports the step-halving estimate of the discretisation bias."))

    @model_validator(mode="after")
    def _bounded_work(self) -> HestonOptionParams:
        _check_path_steps(self.paths, self.steps)
        _check_gamma_correlation(self.greeks, self.correlation)
        check_float32_paths(spot=self.spot, strike=self.strike, rate=self.rate, carry=self.dividend_yield,
                            maturity=self.maturity, volatility=heston_volatility(self.initial_variance,
                                                                                 self.long_variance))
        return self


class PortfolioVarParams(_Params):
    """Value at risk of a portfolio of lognormal assets with correlated normal log-return shocks.

    ``exposures`` are position values today; a shock is the log-return ``vol sqrt(h/252) x - vol^2 h/504``
    over ``h`` trading days (drift-corrected so that each price is a martingale: expected P&L zero).
    ``revaluation`` ``linear`` uses P&L = sum(exposure * vol sqrt(h/252) x) (delta-normal, the case with a
    closed form), ``full`` reprices each position as exposure * (exp(shock) - 1).
    """

    job_type: ClassVar[JobType] = JobType.PORTFOLIO_VAR

    exposures: vector(MAX_ASSETS)
    volatilities: vector(MAX_ASSETS, "Annualised.")
    correlation: matrix(MAX_ASSETS, "Defaults to the identity.") | None = None
    horizon_days: float = Field(1.0, gt=0, le=TRADING_DAYS_PER_YEAR, description=(
        f"Trading days (volatilities scale with sqrt(days / {TRADING_DAYS_PER_YEAR:g})), at most one year."))
    confidence: float = Field(0.99, gt=0.5, lt=1.0, description="VaR/CVaR level: the loss quantile reported.")
    interval_confidence: Confidence = DEFAULT_CONFIDENCE
    revaluation: Literal["linear", "full"] = "linear"
    paths: Paths = 1_000_000
    seed: Seed = 42

    @model_validator(mode="after")
    def _consistent_shapes(self) -> PortfolioVarParams:
        n = len(self.exposures)
        if len(self.volatilities) != n:
            raise ValueError(f"volatilities has {len(self.volatilities)} entries, exposures has {n}")
        if any(v <= 0 for v in self.volatilities):
            raise ValueError("volatilities must be positive")
        if self.correlation is not None:
            _check_correlation(self.correlation, n)
        if not MIN_VAR_PATHS <= self.paths <= MAX_VAR_PATHS:
            raise ValueError(f"portfolio_var takes {MIN_VAR_PATHS} to {MAX_VAR_PATHS:.3g} paths (scenarios), "
                             f"not {self.paths}")
        return self


class BasketModel(StrEnum):
    GBM = "gbm"
    HESTON = "heston"


class HestonAssets(_Params):
    """Per-asset Heston variance processes of a basket; each list has one entry per asset.

    ``correlation`` is each asset's price-variance correlation; variance shocks are otherwise independent.
    """

    initial_variance: vector(MAX_BASKET_ASSETS)
    long_variance: vector(MAX_BASKET_ASSETS)
    mean_reversion: vector(MAX_BASKET_ASSETS)
    vol_of_vol: vector(MAX_BASKET_ASSETS)
    correlation: vector(MAX_BASKET_ASSETS)

    @model_validator(mode="after")
    def _valid(self) -> HestonAssets:
        n = len(self.initial_variance)
        for name in ("long_variance", "mean_reversion", "vol_of_vol", "correlation"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"heston.{name} has {len(getattr(self, name))} entries, initial_variance has {n}")
        for name, low, high in (("initial_variance", 0, 4), ("long_variance", 0, 4), ("mean_reversion", 0, 50),
                                ("vol_of_vol", 0, 5)):
            if not all(low < v <= high for v in getattr(self, name)):
                raise ValueError(f"heston.{name} entries must lie in ({low}, {high}]")
        for name, floor, why in (("initial_variance", MIN_VARIANCE, _VARIANCE_WHY),
                                 ("long_variance", MIN_VARIANCE, _VARIANCE_WHY),
                                 ("vol_of_vol", MIN_VOL_OF_VOL, _VOL_OF_VOL_WHY)):
            if min(getattr(self, name)) < floor:
                raise ValueError(f"heston.{name} entries {below_floor(floor, why)}")
        if not all(-1 <= r <= 1 for r in self.correlation):
            raise ValueError("heston.correlation entries must lie in [-1, 1]")
        return self


class BasketOptionParams(_Params):
    """A European call/put on the weighted sum of correlated assets, under GBM or per-asset Heston.

    GBM steps are exact (``steps`` only matters for Heston and for exercise dates); under GBM the
    geometric basket option (closed form) is the control variate, under Heston the discounted basket.
    """

    job_type: ClassVar[JobType] = JobType.BASKET_OPTION

    spots: vector(MAX_BASKET_ASSETS)
    weights: vector(MAX_BASKET_ASSETS, "Units of each asset.")
    volatilities: vector(MAX_BASKET_ASSETS, "GBM: annualised volatility per asset.") | None = None
    heston: HestonAssets | None = Field(None, description="Heston: variance process per asset.")
    dividend_yields: vector(MAX_BASKET_ASSETS, "Continuous yield per asset; default zero.") | None = None
    correlation: matrix(MAX_BASKET_ASSETS, "Of the assets' price shocks; default identity.") | None = None
    model: Annotated[BasketModel, BY_VALUE] = BasketModel.GBM
    payoff: Literal["arithmetic", "geometric"] = Field("arithmetic", description=(
        "On sum w_i S_i, or on the geometric basket W prod S_i^(w_i/W), W = sum w_i (gbm, positive weights)."))
    strike: float = Field(100.0, ge=0, le=1e9, description=(
        f"0 (an exchange option, e.g. weights [1, -1]) or at least {MIN_PRICE:g}."))
    rate: float = Field(0.05, ge=-1.0, le=1.0)
    maturity: Maturity = 1.0
    kind: Annotated[OptionKind, BY_VALUE] = OptionKind.CALL
    steps: Integer = Field(1, ge=1, le=MAX_STEPS)
    paths: Paths = 1_000_000
    seed: Seed = 42
    control_variate: bool = True
    antithetic: bool = Field(False, description=(
        "Price on pairs of paths driven by z and -z (a sample is the pair); Greeks take single paths."))
    confidence: Confidence = DEFAULT_CONFIDENCE
    greeks: Greeks = []

    @model_validator(mode="before")
    @classmethod
    def _heston_steps(cls, data: Any) -> Any:
        # GBM steps are exact, so one step is the right default; Heston (QE) steps are not
        if isinstance(data, dict) and data.get("model") == BasketModel.HESTON and "steps" not in data:
            data = {**data, "steps": HESTON_BASKET_STEPS}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> BasketOptionParams:
        n = len(self.spots)
        if len(self.weights) != n:
            raise ValueError(f"weights has {len(self.weights)} entries, spots has {n}")
        if any(v <= 0 for v in self.spots):
            raise ValueError("spots must be positive")
        if min(self.spots) < MIN_PRICE:
            raise ValueError(f"spots entries {below_floor(MIN_PRICE, _PRICE_WHY)}")
        # weights of either sign: a negative weight is a short leg (a spread or exchange option)
        if min(abs(w) for w in self.weights) < MIN_WEIGHT:
            why = "the basket is a float32 sum of weighted prices"
            raise ValueError(f"weights entries in absolute value {below_floor(MIN_WEIGHT, why)}; "
                             "negative weights are short legs")
        if self.payoff == "geometric" and (self.model is not BasketModel.GBM or min(self.weights) <= 0):
            raise ValueError("payoff geometric needs model gbm and positive weights (W prod S_i^(w_i/W))")
        if 0 < self.strike < MIN_PRICE:
            raise ValueError(f"strike {below_floor(MIN_PRICE, _PRICE_WHY)}, or 0 for an exchange option")
        if self.dividend_yields is not None and (len(self.dividend_yields) != n
                                                 or any(abs(q) > 1 for q in self.dividend_yields)):
            raise ValueError(f"dividend_yields must have {n} entries in [-1, 1]")
        if self.model is BasketModel.GBM:
            if self.volatilities is None or len(self.volatilities) != n:
                raise ValueError(f"a gbm basket needs volatilities with {n} entries")
            if not all(0 < v <= 5 for v in self.volatilities):
                raise ValueError("volatilities must lie in (0, 5]")
            if min(self.volatilities) < MIN_VOLATILITY:
                raise ValueError(f"volatilities entries {below_floor(MIN_VOLATILITY, _VOL_WHY)}")
        elif self.heston is None or len(self.heston.initial_variance) != n:
            raise ValueError(f"a heston basket needs heston parameters with {n} entries each")
        # the other model's parameters would be silently ignored: refuse them, as option_book does
        other = "heston" if self.model is BasketModel.GBM else "volatilities"
        if getattr(self, other) is not None:
            raise ValueError(f"{other} does not apply to model {self.model.value}: give {other} only with model "
                             f"{'heston' if other == 'heston' else 'gbm'}")
        if self.correlation is not None:
            _check_correlation(self.correlation, n)
        for i in range(n):
            # each asset's price enters the float32 basket times its weight
            volatility = (self.volatilities[i] if self.volatilities is not None else heston_volatility(
                self.heston.initial_variance[i], self.heston.long_variance[i]) if self.heston is not None else 0.0)
            check_float32_paths(spot=self.spots[i] * max(1.0, abs(self.weights[i])), strike=self.strike,
                                rate=self.rate, carry=self.yields()[i], maturity=self.maturity,
                                volatility=volatility, what=f"asset {i}")
        _check_path_steps(self.paths * n, self.steps)
        if self.greeks and self.paths > MAX_FD_GREEK_PATHS:
            raise ValueError(f"with greeks at most {MAX_FD_GREEK_PATHS:,} paths (every revaluation's per-path "
                             f"cash flows are kept), not {self.paths:,}")
        return self

    def yields(self) -> list[float]:
        """Dividend yields, zero where not given."""
        return self.dividend_yields if self.dividend_yields is not None else [0.0] * len(self.spots)


class AmericanOptionParams(BasketOptionParams):
    """An American or Bermudan call/put on one asset or a basket, by Longstaff-Schwartz regression.

    Exercise is allowed at ``exercise_dates`` equally spaced dates (the last is maturity); ``None`` means
    every step (the American option, approximated by ``steps`` dates). The exercise rule is regressed on
    ``regression_paths`` paths independent of the ``paths`` that price it, so the price is a low-biased bound.
    """

    job_type: ClassVar[JobType] = JobType.AMERICAN_OPTION

    steps: Integer = Field(50, ge=1, le=MAX_STEPS)
    exercise_dates: Integer | None = Field(None, ge=1, le=MAX_EXERCISE_DATES)
    regression_paths: Integer = Field(100_000, ge=MIN_REGRESSION_PATHS, le=MAX_REGRESSION_PATHS)
    basis_degree: Integer = Field(3, ge=1, le=MAX_BASIS_DEGREE, description="Polynomial degree in the basket value.")

    @model_validator(mode="after")
    def _dates(self) -> AmericanOptionParams:
        if self.strike < MIN_PRICE:
            raise ValueError(f"american_option needs strike >= {MIN_PRICE:g}: the exercise rule regresses on "
                             "powers of basket / strike")
        if self.payoff != "arithmetic":
            raise ValueError("american_option takes payoff arithmetic only")
        dates = self.dates()
        if self.steps % dates:
            raise ValueError(f"steps ({self.steps}) must be a multiple of exercise_dates ({dates})")
        if dates > MAX_EXERCISE_DATES:
            raise ValueError(f"at most {MAX_EXERCISE_DATES} exercise dates, not {dates}")
        if self.regression_paths * dates > MAX_REGRESSION_VALUES:
            raise ValueError(f"regression_paths x exercise dates = {self.regression_paths * dates:.3g} exceeds "
                             f"{MAX_REGRESSION_VALUES:.3g}")
        _check_path_steps(self.regression_paths * len(self.spots), self.steps)
        return self

    def dates(self) -> int:
        """Number of exercise dates."""
        return self.exercise_dates if self.exercise_dates is not None else self.steps


class BookModel(StrEnum):
    BLACK_SCHOLES = "black_scholes"
    HESTON = "heston"


HESTON_BOOK_FIELDS: Final = frozenset({"initial_variance", "long_variance", "mean_reversion", "vol_of_vol",
                                        "correlation"})


class BookContract(_Params):
    """One European option of a book."""

    strike: Price
    maturity: Maturity = Field(description="Years; a whole number of steps (see steps_per_year).")
    kind: Annotated[OptionKind, BY_VALUE] = OptionKind.CALL


class OptionBookParams(_Params):
    """A book of European options on one underlying, priced together on common random numbers.

    Every path is walked once to the longest maturity; each contract is paid from the same path at its
    own maturity, which must fall on the step grid (``maturity * steps_per_year`` a whole number). Under
    ``black_scholes`` the steps are exact; under ``heston`` they are Andersen QE steps (as ``heston_option``'s).
    """

    job_type: ClassVar[JobType] = JobType.OPTION_BOOK

    spot: Price = 100.0
    rate: float = Field(0.05, ge=-1.0, le=1.0)
    dividend_yield: float = Field(0.0, ge=-1.0, le=1.0)
    model: Annotated[BookModel, BY_VALUE] = BookModel.BLACK_SCHOLES
    volatility: Volatility = Field(0.2, description="black_scholes: annualised volatility.")
    initial_variance: Variance = Field(0.04, description="heston: as in heston_option.")
    long_variance: Variance = 0.04
    mean_reversion: float = Field(1.5, gt=0, le=50.0)
    vol_of_vol: VolOfVol = 0.5
    correlation: float = Field(-0.7, ge=-1.0, le=1.0)
    steps_per_year: Integer = Field(252, ge=1, le=MAX_STEPS)
    contracts: list[BookContract] = Field(min_length=1, max_length=MAX_BOOK_CONTRACTS)
    paths: Paths = 1_000_000
    seed: Seed = 42
    control_variate: bool = True
    confidence: Confidence = DEFAULT_CONFIDENCE
    greeks: Greeks = []

    @model_validator(mode="after")
    def _on_the_grid(self) -> OptionBookParams:
        # the other model's params may be present at their defaults (a result's echoed params carry
        # every field), but a value set for them would be silently ignored: refuse it
        other = HESTON_BOOK_FIELDS if self.model is BookModel.BLACK_SCHOLES else {"volatility"}
        if given := sorted(f for f in other if getattr(self, f) != type(self).model_fields[f].default):
            raise ValueError(f"{', '.join(given)} do(es) not apply to model {self.model.value}")
        for i, contract in enumerate(self.contracts):
            steps = contract.maturity * self.steps_per_year
            if abs(steps - round(steps)) > 1e-6 * max(steps, 1.0) or round(steps) < 1:
                raise ValueError(f"contracts[{i}].maturity {contract.maturity} is not a whole number of steps at "
                                 f"{self.steps_per_year} steps per year")
        if self.model is BookModel.HESTON:
            _check_gamma_correlation(self.greeks, self.correlation)
        volatility = (self.volatility if self.model is BookModel.BLACK_SCHOLES
                      else heston_volatility(self.initial_variance, self.long_variance))
        check_float32_paths(spot=self.spot, strike=max(c.strike for c in self.contracts), rate=self.rate,
                            carry=self.dividend_yield, maturity=max(c.maturity for c in self.contracts),
                            volatility=volatility)
        steps = self.steps()
        if max(steps) > MAX_STEPS:
            raise ValueError(f"the longest maturity needs {max(steps)} steps, the limit is {MAX_STEPS}")
        _check_path_steps(self.paths, max(steps))
        return self

    def steps(self) -> list[int]:
        """Each contract's maturity in steps."""
        return [round(c.maturity * self.steps_per_year) for c in self.contracts]


def _check_correlation(matrix: list[list[float]], n: int) -> None:
    if len(matrix) != n or any(len(row) != n for row in matrix):
        raise ValueError(f"correlation must be a {n}x{n} matrix")
    for i, row in enumerate(matrix):
        if abs(row[i] - 1.0) > 1e-9:
            raise ValueError("correlation must have ones on its diagonal")
        for j, value in enumerate(row):
            if abs(value - matrix[j][i]) > 1e-9:
                raise ValueError("correlation must be symmetric")
            if not -1.0 <= value <= 1.0:
                raise ValueError("correlation entries must lie in [-1, 1]")
    _check_positive_definite(matrix)


def _check_positive_definite(matrix: list[list[float]]) -> None:
    import numpy as np

    try:
        np.linalg.cholesky(np.asarray(matrix, dtype=float))
    except np.linalg.LinAlgError:
        raise ValueError("correlation must be positive definite (no Cholesky factor exists)") from None


def _check_gamma_correlation(greeks: list[Greek], correlation: float) -> None:
    # gamma's likelihood-ratio weight divides by sqrt(1 - correlation^2): at |correlation| = 1 the first
    # step's two shocks have no joint density (docs/kernels.md, Greeks)
    if Greek.GAMMA in greeks and abs(correlation) == 1.0:
        raise ValueError(f"greeks: gamma needs |correlation| < 1 (at correlation = {correlation:g} the first step's "
                         "price has no density given its variance, so no likelihood-ratio weight)")


def check_float32_paths(*, spot: float, strike: float, rate: float, carry: float, maturity: float,
                        volatility: float, what: str = "") -> None:
    """Refuse a contract whose simulated prices leave float32's range, with the first bound it breaks.

    A path's price is ``F exp(volatility sqrt(maturity) z)`` with the median ``F = spot exp((rate - carry -
    volatility^2 / 2) maturity)`` and ``|z|`` up to ``NORMAL_DRAW_MAX``; payoffs are discounted by
    ``exp(-rate maturity)``, and the error bar sums their squares. Outside these bounds the float32 path
    saturates or underflows, and the job would report a confident wrong answer (0.0 +/- 0.0 where the closed form
    says 1e9). ``volatility`` is the annualised volatility the paths diffuse at (a Heston model's: the square root
    of its larger variance level).
    """
    where = f"{what}: " if what else ""
    spread = NORMAL_DRAW_MAX * volatility * math.sqrt(maturity)
    if spread > EXP32_LIMIT:
        # past this the mean of the terminal price also lies beyond the draws the paths take (sigma sqrt(T) > 2 z)
        raise ValueError(f"{where}volatility x sqrt(maturity) = {volatility * math.sqrt(maturity):.3g} is beyond what "
                         f"float32 paths can price: a draw {NORMAL_DRAW_MAX:.2f} standard deviations out moves the "
                         f"price by e^{spread:.0f}, past float32's e^{EXP32_LIMIT:.0f}; at most "
                         f"{EXP32_LIMIT / NORMAL_DRAW_MAX:.3g}")
    if abs(rate * maturity) > EXP32_LIMIT:
        raise ValueError(f"{where}rate x maturity = {rate * maturity:.3g}: the discount factor "
                         f"e^{-rate * maturity:.0f} is outside float32's range (e^-{EXP32_LIMIT:.0f} to "
                         f"e^{EXP32_LIMIT:.0f})")
    median = math.log(spot) + (rate - carry - 0.5 * volatility**2) * maturity
    if median < FLOAT32_LOG_MIN:
        raise ValueError(f"{where}the median simulated price, e^{median:.0f}, underflows float32 (below "
                         f"e^{FLOAT32_LOG_MIN:.0f}): every path would be worth 0")
    if median + spread > FLOAT32_LOG_MAX:
        raise ValueError(f"{where}the highest simulated prices, e^{median + spread:.0f}, overflow float32 (above "
                         f"e^{FLOAT32_LOG_MAX:.0f})")
    discounted = max(median + spread, math.log(strike) if strike > 0 else -math.inf) - rate * maturity
    if discounted > FLOAT32_LOG_MAX / 2:
        raise ValueError(f"{where}discounted payoffs up to e^{discounted:.0f} overflow float32 when the error bar "
                         f"squares them (above e^{FLOAT32_LOG_MAX / 2:.0f})")


def heston_volatility(initial_variance: float, long_variance: float) -> float:
    """The volatility a Heston path diffuses at, for the float32 bounds: the larger of its variance levels (the
    variance's mean moves from the first towards the second)."""
    return math.sqrt(max(initial_variance, long_variance))


def _check_path_steps(paths: int, steps: int) -> None:
    if paths * steps > MAX_PATH_STEPS:
        raise ValueError(f"paths x steps = {paths * steps:.3g} exceeds the limit of {MAX_PATH_STEPS:.3g}")


def job_models(base: type[BaseModel] = _Params) -> dict[str, type[BaseModel]]:
    """The params model of each job type, by type name, in ``JobType``'s order (then any other): every model under
    ``base`` that names its ``job_type``. A type is declared once, on its model; the tables below are read from it."""
    found: dict[str, type[BaseModel]] = {}
    pending = [base]
    while pending:
        model = pending.pop(0)
        pending += model.__subclasses__()
        if "job_type" not in vars(model):
            continue
        job_type = vars(model)["job_type"]
        owner = found.setdefault(job_type, model)
        # a subclass of a type's model is of that type (gpurt.client's job builders); another model is a mistake
        if not issubclass(model, owner):
            raise TypeError(f"{model.__name__} and {owner.__name__} both name job type {job_type}")
    order = {job_type: i for i, job_type in enumerate(JobType)}
    return dict(sorted(found.items(), key=lambda item: order.get(item[0], len(order))))


def _models_of_every_type() -> dict[JobType, type[_Params]]:
    models = job_models()
    if missing := [job_type.value for job_type in JobType if job_type not in models]:
        raise TypeError(f"no params model names job type(s) {', '.join(missing)}: declare job_type on its model")
    return {JobType(job_type): model for job_type, model in models.items()}


PARAMS_BY_TYPE: Final[dict[JobType, type[_Params]]] = _models_of_every_type()

# Every job type's params, for the protocol's ``JobRequest.params``: a union in JobType's order.
JobParams = functools.reduce(operator.or_, PARAMS_BY_TYPE.values())  # type: ignore[arg-type]


def parse_params(job_type: JobType | str, params: object) -> JobParams:
    """Validate ``params`` for ``job_type``; raises ``ValueError``/``ValidationError`` with the reason."""
    model = PARAMS_BY_TYPE[JobType(job_type)]
    return model.model_validate(params if params is not None else {})  # type: ignore[return-value]
