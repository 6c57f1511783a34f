"""GPU Runtime: Monte Carlo risk jobs on GPUs, from a notebook, a script or the ``gpurt`` command.

::

    import gpurt

    with gpurt.Client() as platform:               # the platform `gpurt local up` started, or project=...
        result = platform.submit(gpurt.EuropeanOption(strike=105, greeks=["delta", "vega"])).result(timeout=120)
        result.to_frame()

This is the one name users import. ``import gpurt`` is light: the Python API (``gpurt.client``: jobs,
futures, results) loads on first use of one of its names, so the command line and scripts that only need a
submodule pay nothing for it. The command line is ``gpurt.cli``; the benchmarks are ``gpurt.bench``. See
docs/python-api.md.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpurt.client import (
        AmericanOption,
        AsianOption,
        Basket,
        Client,
        ClientClosed,
        ClientError,
        Contract,
        EuropeanOption,
        GreekValue,
        HestonAssets,
        HestonOption,
        Job,
        JobCancelled,
        JobError,
        JobFailed,
        JobFuture,
        JobRejected,
        JobTimeout,
        Noop,
        OptionBook,
        PlatformNotRunning,
        PortfolioVaR,
        QueueError,
        RandomWalk,
        Result,
        as_completed,
        gather,
        plot_results,
        to_frame,
        wait,
    )

# The names of the Python API, each loaded from gpurt.client when first asked for (PEP 562).
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


def __getattr__(name: str) -> Any:
    if name in __all__:
        value = getattr(import_module("gpurt.client"), name)
        globals()[name] = value  # once loaded, an ordinary attribute
        return value
    raise AttributeError(f"module 'gpurt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
