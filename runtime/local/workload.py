"""The demo's workload: the deploy probe and a realistic batch of risk jobs, at two sizes.

``quick`` keeps every job small enough for a CI run on two cores; the full size gives estimates a risk
user would recognise (standard errors around a cent on a 100-spot option).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

from components.contract import PROBE_MESSAGE
from runtime.protocol import JobRequest

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


FULL: Final = Sizes(option_paths=500_000, asian_paths=100_000, var_paths=200_000, walk_paths=100_000,
                    walk_steps=250, convergence_paths=(1_000, 4_000, 16_000, 64_000, 256_000, 1_024_000))
QUICK: Final = Sizes(option_paths=20_000, asian_paths=5_000, var_paths=20_000, walk_paths=5_000,
                     walk_steps=50, convergence_paths=(1_000, 4_000, 16_000, 64_000))


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


def build_workload(run_id: str, quick: bool) -> Workload:
    """The probe plus options, a portfolio VaR, a random walk and the convergence series."""
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
    convergence: dict[str, int] = {}
    for i, paths in enumerate(sizes.convergence_paths):
        job_id = f"{run_id}-convergence-{paths}"
        convergence[job_id] = paths
        # Plain estimator (no variance reduction), so the interval visibly shrinks like 1/sqrt(paths).
        jobs.append({"job_id": job_id, "type": "european_option",
                     "params": {**CONVERGENCE_OPTION, "paths": paths, "seed": 1000 + i,
                                "antithetic": False, "control_variate": False}})
    requests = [JobRequest.model_validate(job) for job in jobs]
    return Workload(requests, probe_id=probe_id, var_id=var_id, convergence_ids=convergence)
