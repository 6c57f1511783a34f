"""Which jobs are tiny enough to run packed: several requests in one Dask task (docs/scheduler.md, "Packing").

A Dask task costs the scheduler, the Dask scheduler and the worker a round trip whatever the job does; for
a job of a few milliseconds that round trip is most of the slot's time. So when a slot takes a tiny job,
it also takes the tiny jobs already waiting for a slot right behind it (in arrival order, up to
``PACK_MAX_JOBS`` in all), runs them one after another in one task and publishes their results in one
Publish RPC. Each job keeps its own result, cancel event, retries and dead-lettering. Which jobs are tiny
is each type's size rule (``kernels.sizes``: a short noop, a small European option without Greeks).
"""

from __future__ import annotations

from typing import Final

from kernels.descriptors import descriptor_of
from runtime.protocol.messages import JobRequest
from runtime.scheduler.records import Delivery

# Jobs in one pack at most. A pack runs its jobs in turn, so the last one's result waits for the others:
# with tiny jobs that is at most PACK_MAX_JOBS x the largest tiny job.
PACK_MAX_JOBS: Final = 8


def is_tiny(request: JobRequest) -> bool:
    """Whether ``request`` may run packed with other tiny jobs: its type's size rule says so
    (``kernels.sizes``, where the thresholds are)."""
    descriptor = descriptor_of(request.type)
    return isinstance(request.params, descriptor.params) and descriptor.size.tiny(request.params)


def tiny_job_id(delivery: Delivery) -> str | None:
    """The job id of a delivery whose body is a valid tiny job; None for any other (never packed)."""
    request = delivery.request
    return request.job_id if isinstance(request, JobRequest) and is_tiny(request) else None
