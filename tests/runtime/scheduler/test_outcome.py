"""The one mapping from a job's outcome to the protocol's ``JobResult`` (the processor's and ``gpurt run``'s)."""

from __future__ import annotations

from kernels.jobs import JobOutput
from runtime.protocol.messages import MAX_RESULT_BYTES, ErrorKind, JobRequest, JobStatus
from runtime.scheduler.backends.base import placed
from runtime.scheduler.outcome import ended_result, publishable, succeeded_result

REQUEST = JobRequest.model_validate({"job_id": "call-1", "type": "european_option"})


def test_a_run_maps_onto_a_succeeded_result_with_its_measurements() -> None:
    output = JobOutput(summary={"estimate": 10.4}, artifacts={"a.npy": b"x"}, device="cuda:0", elapsed_s=2.0,
                       paths=1_000_000, kernel_s=0.5)
    result = succeeded_result(REQUEST, output, {"a.npy": "file:///r/a.npy"}, attempt=3, queue_wait_s=1.5)
    assert (result.job_id, result.type, result.status, result.attempt) == (
        "call-1", REQUEST.type, JobStatus.SUCCEEDED, 3)
    assert result.result == {"estimate": 10.4} and result.artifacts == {"a.npy": "file:///r/a.npy"}
    assert result.error is None
    # paths per second of kernel time: 1e6 paths in 0.5 s
    assert result.metrics.model_dump() == {"queue_wait_s": 1.5, "run_s": 2.0, "device": "cuda:0",
                                           "paths_per_s": 2_000_000.0, "backend": None, "spilled_after_s": None}


def test_a_spilled_run_says_where_it_ran_and_after_how_long() -> None:
    output = placed(JobOutput(summary={"estimate": 10.4}, device="cuda:0", elapsed_s=2.0), "vertex", 301.5)
    metrics = succeeded_result(REQUEST, output, {}).metrics
    assert (metrics.backend, metrics.spilled_after_s, metrics.device, metrics.run_s) == ("vertex", 301.5, "cuda:0", 2.0)


def test_a_run_in_process_has_the_first_attempt_and_no_queue_wait() -> None:
    result = succeeded_result(REQUEST, JobOutput(summary={}), {})
    assert result.attempt == 1 and result.metrics.queue_wait_s is None and result.metrics.paths_per_s is None


def test_an_unsuccessful_end_carries_its_error_and_no_result() -> None:
    result = ended_result(REQUEST, JobStatus.CANCELLED, ErrorKind.CANCELLED, "cancelled by request", attempt=2,
                          queue_wait_s=0.25)
    assert (result.status, result.attempt, result.type) == (JobStatus.CANCELLED, 2, REQUEST.type)
    assert result.error is not None and (result.error.kind, result.error.message) == (
        ErrorKind.CANCELLED, "cancelled by request")
    assert result.result is None and result.artifacts == {} and result.metrics.queue_wait_s == 0.25


def test_a_result_too_large_to_publish_becomes_a_short_permanent_failure() -> None:
    big = succeeded_result(REQUEST, JobOutput(summary={"values": list(range(300_000))}), {"a.npy": "file:///a"})
    assert len(big.model_dump_json()) > MAX_RESULT_BYTES
    result = publishable(big)
    assert result.status is JobStatus.FAILED and result.error.kind is ErrorKind.PERMANENT
    assert result.result is None and result.artifacts == {} and result.job_id == "call-1"
    assert "over the 1,000,000-byte limit" in result.error.message and len(result.model_dump_json()) < 1_000
    small = succeeded_result(REQUEST, JobOutput(summary={"estimate": 1.0}), {})
    assert publishable(small) is small
