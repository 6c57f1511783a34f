"""Which jobs are tiny enough to run packed: several requests in one Dask task (docs/scheduler.md, "Packing").

A Dask task costs the scheduler, the Dask scheduler and the worker a round trip whatever the job does; for
a job of a few milliseconds that round trip is most of the slot's time. So when a slot takes a tiny job,
it also takes the tiny jobs already waiting for a slot right behind it (in arrival order, up to
``PACK_MAX_JOBS`` in all), runs them one after another in one task and publishes their results in one
Publish RPC. Each job keeps its own result, cancel event, retries and dead-lettering.
"""

from __future__ import annotations

from typing import Final

from kernels.params import EuropeanOptionParams, JobType, NoopParams
from runtime.protocol.messages import JobRequest
from runtime.scheduler.records import Delivery

# Jobs in one pack at most. A pack runs its jobs in turn, so the last one's result waits for the others:
# with tiny jobs that is at most PACK_MAX_JOBS x the largest tiny job.
PACK_MAX_JOBS: Final = 8
# A noop is tiny up to this sleep (seconds): as long as a Dask round trip, a few times over.
PACK_MAX_SLEEP_S: Final = 0.1
# A European option without Greeks is tiny up to this many paths (milliseconds of kernel work, CPU or GPU).
PACK_MAX_PATHS: Final = 100_000


def is_tiny(request: JobRequest) -> bool:
    """Whether ``request`` may run packed with other tiny jobs."""
    params = request.params
    if request.type is JobType.NOOP and isinstance(params, NoopParams):
        return params.sleep_s <= PACK_MAX_SLEEP_S
    if request.type is JobType.EUROPEAN_OPTION and isinstance(params, EuropeanOptionParams):
        return params.paths <= PACK_MAX_PATHS and not params.greeks
    return False


def tiny_job_id(delivery: Delivery) -> str | None:
    """The job id of a delivery whose body is a valid tiny job; None for any other (never packed)."""
    request = delivery.request
    return request.job_id if isinstance(request, JobRequest) and is_tiny(request) else None
