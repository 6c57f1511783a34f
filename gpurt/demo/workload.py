"""The demo's workload: the deploy probe and a realistic batch of risk jobs, at two sizes.

``quick`` keeps every job small enough for a CI run on two cores; the full size gives estimates a risk
user would recognise (standard errors around a cent on a 100-spot option).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

from kernels.descriptors import DESCRIPTORS
from runtime.protocol.contract import PROBE_MESSAGE
from runtime.protocol.messages import JobRequest

# A ten-asset book: two sectors, correlation 0.6 inside a sector and 0.25 across (positive definite).
ASSETS: Final = 10
INTRA_SECTOR_CORRELATION: Final = 0.6
CROSS_SECTOR_CORRELATION: Final = 0.25
# The convergence study prices one at-the-money call at growing path counts (factor 4: CI halves).
CONVERGENCE_OPTION: Final = {"spot": 100.0, "strike": 100.0, "rate": 0.05, "volatility": 0.2, "maturity": 1.0,
                             "kind": "call"}


@dataclass(frozen=True)
class Sizes:
    """Path counts per job family."""

    option_paths: int
    asian_paths: int
    var_paths: int
    walk_paths: int
    walk_steps: int
    convergence_paths: tuple[int, ...]
    heston_paths: int  # Heston option with Greeks, and the Heston book behind the smile plot
    basket_paths: int
    american_paths: int  # pricing paths; as many again fit the exercise rule


FULL: Final = Sizes(option_paths=500_000, asian_paths=100_000, var_paths=200_000, walk_paths=100_000,
                    walk_steps=250, convergence_paths=(1_000, 4_000, 16_000, 64_000, 256_000, 1_024_000),
                    heston_paths=200_000, basket_paths=200_000, american_paths=100_000)
QUICK: Final = Sizes(option_paths=20_000, asian_paths=5_000, var_paths=20_000, walk_paths=5_000,
                     walk_steps=50, convergence_paths=(1_000, 4_000, 16_000, 64_000),
                     heston_paths=5_000, basket_paths=10_000, american_paths=5_000)
# The Heston market of the Greeks and smile jobs: a skew from the negative price-variance correlation.
HESTON_MARKET: Final = {"spot": 100.0, "rate": 0.03, "dividend_yield": 0.01, "initial_variance": 0.04,
                        "long_variance": 0.05, "mean_reversion": 1.5, "vol_of_vol": 0.5, "correlation": -0.7}
ALL_GREEKS: Final = ["delta", "gamma", "vega", "rho", "theta"]


@dataclass(frozen=True)
class Workload:
    """The requests of one demo run, and which of them feed the report's plots."""

    requests: list[JobRequest]
    probe_id: str
    var_id: str
    convergence_ids: dict[str, int]  # job id -> paths


def correlation_matrix(n: int = ASSETS) -> list[list[float]]:
    """Two equal sectors: ``INTRA`` inside a sector, ``CROSS`` across, ones on the diagonal."""
    half = math.ceil(n / 2)
    return [[1.0 if i == j else (INTRA_SECTOR_CORRELATION if (i < half) == (j < half) else CROSS_SECTOR_CORRELATION)
             for j in range(n)] for i in range(n)]


def _risk_desk_jobs(run_id: str, sizes: Sizes) -> list[dict[str, Any]]:
    """Heston with Greeks, a Heston book across strikes (the smile), a basket and an American put."""
    smile_book = [{"strike": strike, "maturity": 1.0, "kind": "put" if strike < 100 else "call"}
                  for strike in (70.0, 80.0, 90.0, 100.0, 110.0, 120.0, 130.0)]
    return [
        {"job_id": f"{run_id}-heston-greeks", "type": "heston_option",
         "params": {**HESTON_MARKET, "strike": 100.0, "steps": 64, "paths": sizes.heston_paths,
                    "greeks": ALL_GREEKS}},
        {"job_id": f"{run_id}-heston-book", "type": "option_book",
         "params": {**HESTON_MARKET, "model": "heston", "steps_per_year": 64, "contracts": smile_book,
                    "paths": sizes.heston_paths, "greeks": ALL_GREEKS}},
        {"job_id": f"{run_id}-basket-call", "type": "basket_option",
         "params": {"spots": [100.0, 95.0, 105.0], "weights": [1 / 3] * 3, "volatilities": [0.2, 0.25, 0.3],
                    "correlation": [[1.0, 0.5, 0.3], [0.5, 1.0, 0.4], [0.3, 0.4, 1.0]], "strike": 100.0,
                    "paths": sizes.basket_paths}},
        {"job_id": f"{run_id}-american-put", "type": "american_option",
         "params": {"spots": [100.0], "weights": [1.0], "volatilities": [0.25], "kind": "put", "strike": 100.0,
                    "steps": 50, "paths": sizes.american_paths, "regression_paths": sizes.american_paths}},
    ]


def _every_other_type(run_id: str, covered: set[str], quick: bool) -> list[dict[str, Any]]:
    """One job of each job type the studies above leave out, so the demo runs every type: its descriptor's
    example (``examples/<type>.json``), or in a quick run its first warm-up job (the smallest its validation
    takes)."""
    jobs = []
    for job_type, descriptor in DESCRIPTORS.items():
        if job_type not in covered:
            params = descriptor.warm[0].params if quick and descriptor.warm else descriptor.example
            jobs.append({"job_id": f"{run_id}-{job_type}", "type": job_type, "params": dict(params)})
    return jobs


def build_workload(run_id: str, quick: bool) -> Workload:
    """The probe plus options (Heston with Greeks, a Heston book, a basket, an American put), a portfolio VaR,
    a random walk and the convergence series; then one job of any job type those leave out."""
    sizes = QUICK if quick else FULL
    # The contract's probe body under a per-run id: a job id is answered once per result store, so a
    # fixed id would go unanswered on a platform that already saw it (as `gpurt validate` does too).
    probe_id = f"{PROBE_MESSAGE['job_id']}-{run_id}"
    jobs: list[dict[str, Any]] = [{**PROBE_MESSAGE, "job_id": probe_id}]
    for strike in (80.0, 90.0, 100.0, 110.0, 120.0):
        jobs.append({"job_id": f"{run_id}-euro-call-{strike:.0f}", "type": "european_option",
                     "params": {**CONVERGENCE_OPTION, "strike": strike, "paths": sizes.option_paths}})
    jobs.append({"job_id": f"{run_id}-euro-put-100", "type": "european_option",
                 "params": {**CONVERGENCE_OPTION, "kind": "put", "paths": sizes.option_paths}})
    for strike in (90.0, 100.0, 110.0):
        jobs.append({"job_id": f"{run_id}-asian-call-{strike:.0f}", "type": "asian_option",
                     "params": {**CONVERGENCE_OPTION, "strike": strike, "steps": 52, "paths": sizes.asian_paths}})
    var_id = f"{run_id}-portfolio-var"
    jobs.append({"job_id": var_id, "type": "portfolio_var", "params": {
        "exposures": [1e6 * (1 + i % 3) for i in range(ASSETS)],
        "volatilities": [0.15 + 0.02 * i for i in range(ASSETS)],
        "correlation": correlation_matrix(),
        "horizon_days": 10.0, "confidence": 0.99, "revaluation": "full", "paths": sizes.var_paths}})
    jobs.append({"job_id": f"{run_id}-random-walk", "type": "random_walk",
                 "params": {"paths": sizes.walk_paths, "steps": sizes.walk_steps}})
    jobs += _risk_desk_jobs(run_id, sizes)
    convergence: dict[str, int] = {}
    for i, paths in enumerate(sizes.convergence_paths):
        job_id = f"{run_id}-convergence-{paths}"
        convergence[job_id] = paths
        # Plain estimator (no variance reduction), so the interval visibly shrinks like 1/sqrt(paths).
        jobs.append({"job_id": job_id, "type": "european_option",
                     "params": {**CONVERGENCE_OPTION, "paths": paths, "seed": 1000 + i,
                                "antithetic": False, "control_variate": False}})
    jobs += _every_other_type(run_id, {job["type"] for job in jobs}, quick)
    requests = [JobRequest.model_validate(job) for job in jobs]
    return Workload(requests, probe_id=probe_id, var_id=var_id, convergence_ids=convergence)
