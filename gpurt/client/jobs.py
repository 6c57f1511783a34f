"""Typed job builders: the protocol's own parameter models, each tied to its job type.

Each builder *is* the parameter model the scheduler validates a request with (a subclass that adds nothing:
the model names its job type), so an IDE completes the fields, a wrong field or a value past its limit raises
pydantic's ``ValidationError`` naming the field and the limit before anything is published, and no field is
defined twice. ``OptionBook`` also takes its contracts as its first positional argument.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel

from kernels.params import (
    AmericanOptionParams,
    AsianOptionParams,
    BasketOptionParams,
    BookContract,
    EuropeanOptionParams,
    HestonAssets,
    HestonOptionParams,
    JobType,
    NoopParams,
    OptionBookParams,
    PortfolioVarParams,
    RandomWalkParams,
)
from runtime.protocol.messages import DEFAULT_TIMEOUT_S, JobRequest

__all__ = [
    "AmericanOption",
    "AsianOption",
    "Basket",
    "Contract",
    "EuropeanOption",
    "HestonAssets",
    "HestonOption",
    "Job",
    "Noop",
    "OptionBook",
    "PortfolioVaR",
    "RandomWalk",
]

Contract = BookContract  # one option of an OptionBook: strike, maturity, kind


class Job(BaseModel):
    """A job's parameters together with its type; ``request`` turns it into the message the platform takes."""

    job_type: ClassVar[JobType]  # the parameter model's own (kernels.params), which a builder extends

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse a builder that extends no job type's parameter model: it would have no type to request."""
        super().__init_subclass__(**kwargs)
        if not isinstance(getattr(cls, "job_type", None), JobType):
            raise TypeError(f"{cls.__name__} extends no job type's parameter model (kernels.params)")

    def request(self, job_id: str, *, session_id: str | None = None,
                timeout_s: float = DEFAULT_TIMEOUT_S) -> JobRequest:
        """The validated request for this job under ``job_id``."""
        # Through the request's own validation, by the job type's model, as the scheduler will read it.
        return JobRequest.model_validate({
            "job_id": job_id, "type": self.job_type, "params": self.model_dump(mode="json", exclude_unset=True),
            "session_id": session_id, "timeout_s": timeout_s,
        })


class Noop(NoopParams, Job):
    """A job that only sleeps (``sleep_s``) and may fail on purpose (``fail``): for trying the client out."""


class RandomWalk(RandomWalkParams, Job):
    """The platform's smoke-test random walk."""


class EuropeanOption(EuropeanOptionParams, Job):
    """A European call or put under Black-Scholes (geometric Brownian motion), with optional Greeks."""


class AsianOption(AsianOptionParams, Job):
    """An arithmetic-average Asian option."""


class HestonOption(HestonOptionParams, Job):
    """A European option under the Heston stochastic-volatility model."""


class Basket(BasketOptionParams, Job):
    """A European option on a weighted basket of correlated assets (GBM or per-asset Heston)."""


class AmericanOption(AmericanOptionParams, Job):
    """An American or Bermudan option on one asset or a basket (Longstaff-Schwartz)."""


class PortfolioVaR(PortfolioVarParams, Job):
    """Value at risk and CVaR of a portfolio of correlated lognormal positions."""


class OptionBook(OptionBookParams, Job):
    """A book of European options on one underlying, priced together: ``OptionBook([Contract(...), ...], ...)``."""

    def __init__(self, contracts: Sequence[BookContract | Mapping[str, Any]] | None = None, /,
                 **params: Any) -> None:
        """``contracts`` positionally or by keyword; every other field as ``OptionBookParams`` names it."""
        if contracts is not None:
            params["contracts"] = list(contracts)
        super().__init__(**params)


BUILDERS: dict[JobType, type[Job]] = {cls.job_type: cls for cls in (
    Noop, RandomWalk, EuropeanOption, AsianOption, HestonOption, Basket, AmericanOption, PortfolioVaR, OptionBook)}
