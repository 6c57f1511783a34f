"""Results as the platform hands them to a client, from real kernel runs on the CPU at small path counts.

The plots' tests and the pictures in docs/python-api.md are drawn from these: a job is run by the kernel a
worker runs, its artifacts are written by the scheduler's result store, and the ``JobResult`` around them is
the one a client receives, so a picture sees exactly what a user's ``result.plot()`` sees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from gpurt.client import Result
from runtime.protocol.messages import JobResult, JobStatus
from runtime.scheduler.store import ResultStore
from tests.kernels.job_input import run_raw

# The Heston market of the demo's smile: a skew from the negative price-variance correlation.
HESTON_MARKET: Final = {"spot": 100.0, "rate": 0.03, "dividend_yield": 0.01, "initial_variance": 0.04,
                        "long_variance": 0.05, "mean_reversion": 1.5, "vol_of_vol": 0.5, "correlation": -0.7}
PORTFOLIO: Final = {"exposures": [5e6, 3e6, 2e6], "volatilities": [0.18, 0.25, 0.35],
                    "correlation": [[1.0, 0.6, 0.4], [0.6, 1.0, 0.5], [0.4, 0.5, 1.0]], "confidence": 0.99,
                    "revaluation": "full"}
BASKET: Final = {"spots": [100.0, 95.0, 105.0], "weights": [1 / 3] * 3, "volatilities": [0.2, 0.25, 0.3],
                 "correlation": [[1.0, 0.5, 0.3], [0.5, 1.0, 0.4], [0.3, 0.4, 1.0]], "strike": 100.0}


def kernel_result(store: Path, job_id: str, job_type: str, params: dict[str, Any]) -> Result:
    """Run ``job_type`` with ``params`` on the CPU; its artifacts go to a result store in the folder ``store``."""
    output = run_raw(job_type, params, device="cpu")
    urls = ResultStore(store.as_uri()).put_artifacts(job_id, output.artifacts) if output.artifacts else {}
    return Result(JobResult(job_id=job_id, status=JobStatus.SUCCEEDED, type=job_type, result=output.summary,
                            artifacts=urls))


def heston_book(store: Path, paths: int, strikes: tuple[float, ...] = (70, 80, 90, 100, 110, 120, 130),
                maturities: tuple[float, ...] = (1.0,)) -> Result:
    """A Heston book across strikes (puts below the spot, calls above), with delta and vega."""
    contracts = [{"strike": k, "maturity": t, "kind": "put" if k < 100 else "call"}
                 for t in maturities for k in strikes]
    return kernel_result(store, "heston-book", "option_book", {
        **HESTON_MARKET, "model": "heston", "steps_per_year": 16, "paths": paths, "contracts": contracts,
        "greeks": ["delta", "vega"]})


def var_by_horizon(store: Path, paths: int, horizons: tuple[float, ...] = (1, 5, 10)) -> list[Result]:
    """The portfolio's VaR and CVaR at each horizon (trading days)."""
    return [kernel_result(store, f"var-{days:g}d", "portfolio_var", {**PORTFOLIO, "horizon_days": days,
                                                                     "paths": paths})
            for days in horizons]


def convergence(store: Path, path_counts: tuple[int, ...]) -> list[Result]:
    """One at-the-money call priced with the plain estimator at growing path counts."""
    return [kernel_result(store, f"call-{paths}", "european_option", {
        "strike": 100.0, "paths": paths, "seed": 1 + i, "antithetic": False, "control_variate": False})
        for i, paths in enumerate(path_counts)]
