"""The result cache's rules: which requests and results it keys, and what a cached answer is (docs/scheduler.md,
"Result cache").

A request is answered from the cache when an earlier job computed the same thing with the same kernels and
succeeded. The key is the SHA-256 of the request's ``computation_digest`` (job type and validated params, defaults
filled in, seed included) and the kernel version, so neither a changed parameter, a changed default nor a
changed kernel can find an old result. The store keeps one index object per key naming the job whose result
it is (``ResultStore.put_cache_entry``); the processor takes the hit path.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Final

from kernels.params import JobType
from runtime.protocol.messages import JobMetrics, JobRequest, JobResult, JobStatus

# A noop only sleeps: its point is the run itself (the post-deploy probe proves a worker answers), so it is
# never answered from the cache.
UNCACHED_TYPES: Final = frozenset({JobType.NOOP})


def cache_key(computation_digest: str, kernel_version: str) -> str:
    """The index key (SHA-256, hex) of a computation under a kernel version."""
    return hashlib.sha256(f"{computation_digest}\n{kernel_version}".encode()).hexdigest()


def request_key(request: JobRequest, kernel_version: str) -> str | None:
    """The key under which ``request`` looks for a cached result, or ``None`` when it may not be answered from
    the cache (it opted out with ``cache: false``, or its type is never cached)."""
    if not request.cache or request.type in UNCACHED_TYPES:
        return None
    return cache_key(request.computation_digest(), kernel_version)


def result_key(result: JobResult) -> str | None:
    """The key under which ``result`` is indexed, or ``None`` when it answers no later request: only a result
    that ran (not itself a cached copy) and succeeded, of a cached type, with its computation and kernels named."""
    if (result.status is not JobStatus.SUCCEEDED or result.cached or result.type is None
            or result.type in UNCACHED_TYPES or result.computation_digest is None or result.kernel_version is None):
        return None
    return cache_key(result.computation_digest, result.kernel_version)


def answers(stored: JobResult, request: JobRequest, kernel_version: str) -> bool:
    """Whether ``stored`` (found through the index) may answer ``request``: the index only points at a job id, so
    the result itself must still be a success of the same computation and kernels (an index object written by
    hand, or one left from a job id reused before, finds nothing)."""
    return (stored.status is JobStatus.SUCCEEDED and not stored.cached
            and stored.computation_digest == request.computation_digest()
            and stored.kernel_version == kernel_version)


def cached_answer(request: JobRequest, source: JobResult) -> JobResult:
    """``source``'s outcome as ``request``'s own result: the same ``result`` payload and artifacts, bit for bit,
    under the new job id and session, marked ``cached`` and naming the job it came from.

    Run metrics are left out (this request ran nothing; the source job's are in its own result), and it finished
    now.
    """
    return source.model_copy(update={
        "job_id": request.job_id, "session_id": request.session_id, "attempt": 1, "metrics": JobMetrics(),
        "cached": True, "cached_from": source.job_id, "request_digest": None, "request_message_id": None,
        "finished_at": datetime.now(UTC),
    }, deep=True)
