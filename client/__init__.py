"""The Python API of GPU Runtime: typed jobs (see docs/python-api.md)."""

from client.jobs import (
    AmericanOption,
    AsianOption,
    Basket,
    Contract,
    EuropeanOption,
    HestonAssets,
    HestonOption,
    Job,
    Noop,
    OptionBook,
    PortfolioVaR,
    RandomWalk,
)

__all__ = ["AmericanOption", "AsianOption", "Basket", "Contract", "EuropeanOption", "HestonAssets", "HestonOption",
           "Job", "Noop", "OptionBook", "PortfolioVaR", "RandomWalk"]
