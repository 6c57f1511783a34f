"""The demo submits and waits through the Python API's ``Client``, so it holds its results to the client's rules."""

from __future__ import annotations

import uuid

import pytest

from gpurt.demo.run import run_requests
from runtime.local import LocalPlatform
from runtime.protocol.contract import RESULT_TOPIC
from runtime.protocol.messages import JobRequest, JobResult, JobStatus
from tests.gpurt import ON_THE_CLI_PLATFORM

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(180), ON_THE_CLI_PLATFORM]


def test_a_result_published_under_a_demo_jobs_id_that_answers_another_body_is_passed_over(
        platform: LocalPlatform) -> None:
    # Anyone who may publish results can put one under any job id; only the result naming the digest of the very
    # body the demo sent is the job's (a future's rule, docs/python-api.md "How results reach you").
    request = JobRequest.model_validate({"job_id": f"demo-{uuid.uuid4().hex[:8]}", "type": "noop",
                                         "params": {"sleep_s": 2.0}})
    forged = JobResult(job_id=request.job_id, status=JobStatus.SUCCEEDED, result={"estimate": 42.0},
                       request_digest="0" * 64)
    clients = platform.pubsub()
    sent: list[str] = []

    def forge_while_it_runs() -> None:
        if not sent:
            sent.append(clients.publisher.publish(clients.topic(RESULT_TOPIC), forged.model_dump_json().encode(),
                                                  job_id=request.job_id, status="succeeded").result(timeout=30))

    try:
        results = run_requests(platform, [request], timeout_s=120, on_tick=forge_while_it_runs)
    finally:
        clients.close()
    assert sent  # the forgery was out before the job's own result
    result = results[request.job_id]
    assert result.request_digest == request.digest() and result.result != {"estimate": 42.0}
