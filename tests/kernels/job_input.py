"""The tests' trust boundary: a job as a request's JSON names it, parsed once into what the kernels take.

``kernels.jobs.run_job`` and ``kernels.shards`` take a ``JobType`` and its validated params model; a test
states its jobs as the type's name and a params object, as a user writes them, and converts them here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernels.jobs import JobOutput, run_job
from kernels.params import JobParams, JobType, parse_params


def typed(job_type: str | JobType, params: Mapping[str, Any] | JobParams | None = None) -> tuple[JobType, JobParams]:
    """``(type, validated params)`` of a job given by its type's name and params (raises ``ValueError``)."""
    kind = JobType(job_type)
    return kind, parse_params(kind, params)


def run_raw(job_type: str | JobType, params: Mapping[str, Any] | JobParams | None = None,
                  **kwargs: Any) -> JobOutput:
    """``run_job`` of the job ``typed`` makes of ``job_type`` and ``params``; ``kwargs`` go to ``run_job``."""
    return run_job(*typed(job_type, params), **kwargs)
