"""The Python API of GPU Runtime: typed jobs, a client with futures, results as DataFrames and pictures.

::

    from gpurt.client import Client, EuropeanOption

    with Client() as platform:                     # the platform `gpurt local up` started, or project=...
        result = platform.submit(EuropeanOption(strike=105, greeks=["delta", "vega"])).result(timeout=120)
        result.to_frame()

See docs/python-api.md.
"""

from gpurt.client.errors import (
    ClientClosed,
    ClientError,
    JobCancelled,
    JobError,
    JobFailed,
    JobRejected,
    JobTimeout,
    PlatformNotRunning,
)
from gpurt.client.futures import JobFuture, as_completed, gather, wait
from gpurt.client.jobs import (
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
from gpurt.client.results import GreekValue, Result, plot_results, to_frame
from gpurt.client.session import Client
from runtime.protocol.queues import QueueError

__all__ = [
    "AmericanOption",
    "AsianOption",
    "Basket",
    "Client",
    "ClientClosed",
    "ClientError",
    "Contract",
    "EuropeanOption",
    "GreekValue",
    "HestonAssets",
    "HestonOption",
    "Job",
    "JobCancelled",
    "JobError",
    "JobFailed",
    "JobFuture",
    "JobRejected",
    "JobTimeout",
    "Noop",
    "OptionBook",
    "PlatformNotRunning",
    "PortfolioVaR",
    "QueueError",
    "RandomWalk",
    "Result",
    "as_completed",
    "gather",
    "plot_results",
    "to_frame",
    "wait",
]
