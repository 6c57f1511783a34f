"""A job's outcome as the protocol's ``JobResult``: the one mapping from a run's output, and from a failure.

The scheduler's processor and ``gpurt run`` (one job in the CLI's own process) both build their results
here, so a result has the same fields wherever its job ran.
"""

from __future__ import annotations

from collections.abc import Mapping

from kernels.version import KERNEL_VERSION
from runtime.protocol.messages import (
    MAX_RESULT_BYTES,
    ErrorKind,
    JobError,
    JobMetrics,
    JobRequest,
    JobResult,
    JobStatus,
)
from runtime.scheduler.backends.base import Execution, Placed


def succeeded_result(request: JobRequest, output: Execution, artifacts: Mapping[str, str], *, attempt: int = 1,
                     queue_wait_s: float | None = None, kernel_version: str = KERNEL_VERSION) -> JobResult:
    """The ``succeeded`` result of ``request`` from what its run produced; ``artifacts`` maps name to URL.

    ``kernel_version`` names the kernels that computed it: the result cache answers only requests of that version.
    """
    where = output if isinstance(output, Placed) else None
    metrics = JobMetrics(queue_wait_s=queue_wait_s, run_s=output.elapsed_s, device=output.device,
                         paths_per_s=output.paths_per_s, backend=where.backend if where else None,
                         spilled_after_s=where.spilled_after_s if where else None)
    return JobResult(job_id=request.job_id, status=JobStatus.SUCCEEDED, type=request.type,
                     session_id=request.session_id, attempt=attempt,
                     result=output.summary, metrics=metrics, artifacts=dict(artifacts),
                     computation_digest=request.computation_digest(), kernel_version=kernel_version)


def ended_result(request: JobRequest, status: JobStatus, kind: ErrorKind, message: str, *, attempt: int = 1,
                 queue_wait_s: float | None = None) -> JobResult:
    """The result of ``request`` when it did not succeed (``failed`` or ``cancelled``), with its error."""
    return JobResult(job_id=request.job_id, status=status, type=request.type, session_id=request.session_id,
                     attempt=attempt, computation_digest=request.computation_digest(),
                     metrics=JobMetrics(queue_wait_s=queue_wait_s), error=JobError(kind=kind, message=message))


def conflict_result(request: JobRequest, stored: JobResult) -> JobResult:
    """The ``rejected`` answer to ``request`` when its job id already ended (``stored``) for another computation.

    Never stored: the id's result stays the one that ran; this only tells the sender, whose client waits for
    a result naming its own body, that the id is taken.
    """
    message = (f"job id {request.job_id} already ended ({stored.status.value}) for a different computation "
               f"(job type or params differ); send this request under a new job id")
    return JobResult(job_id=request.job_id, status=JobStatus.REJECTED, type=request.type,
                     session_id=request.session_id, computation_digest=request.computation_digest(),
                     error=JobError(kind=ErrorKind.CONFLICT, message=message))


def publishable(result: JobResult) -> JobResult:
    """``result``, or, when its message would be over ``MAX_RESULT_BYTES``, a short permanent failure in its place.

    A result too large to publish would fail on every delivery alike, and the request end dead-lettered with
    its sender never answered; the failure says why instead, and is final (a retry builds the same result).
    """
    size = len(result.model_dump_json())
    if size <= MAX_RESULT_BYTES:
        return result
    status = JobStatus.REJECTED if result.status is JobStatus.REJECTED else JobStatus.FAILED
    kind = ErrorKind.INVALID if status is JobStatus.REJECTED else ErrorKind.PERMANENT
    message = f"the {result.status.value} result is {size:,} bytes, over the {MAX_RESULT_BYTES:,}-byte limit"
    return result.model_copy(update={"status": status, "result": None, "artifacts": {},
                                     "error": JobError(kind=kind, message=message)})
