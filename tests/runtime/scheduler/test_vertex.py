"""Vertex AI backend at its client seam: a recording stand-in returning real-format CustomJob messages."""

from __future__ import annotations

import json

import fsspec
import pytest
from google.cloud.aiplatform_v1 import CustomJob, JobState
from google.rpc import status_pb2

from kernels.errors import JobCancelled, PermanentJobError, TransientJobError
from runtime.protocol import JobRequest
from runtime.scheduler.backends.vertex import VertexBackend
from runtime.scheduler.backends.vertex_task import main as vertex_task_main

JOB_NAME = "projects/123/locations/us-central1/customJobs/4567"


class RecordingJobService:
    """Answers create/get/cancel like JobServiceClient, walking through ``states``."""

    def __init__(self, *states: JobState, error: str = "") -> None:
        self.states = list(states)
        self.error = error
        self.calls: list[tuple[str, dict]] = []

    def _job(self, state: JobState, display_name: str = "") -> CustomJob:
        job = CustomJob(name=JOB_NAME, display_name=display_name, state=state)
        if self.error:
            job.error = status_pb2.Status(code=13, message=self.error)
        return job

    def create_custom_job(self, parent: str, custom_job: dict) -> CustomJob:
        self.calls.append(("create", {"parent": parent, "custom_job": custom_job}))
        return self._job(JobState.JOB_STATE_QUEUED, custom_job["display_name"])

    def get_custom_job(self, name: str) -> CustomJob:
        self.calls.append(("get", {"name": name}))
        return self._job(self.states.pop(0) if len(self.states) > 1 else self.states[0])

    def cancel_custom_job(self, name: str) -> None:
        self.calls.append(("cancel", {"name": name}))


def _backend(client: RecordingJobService, root: str) -> VertexBackend:
    return VertexBackend(client, project="p", region="us-central1", image="img:sha", machine_type="n1-standard-8",
                         accelerator="NVIDIA_TESLA_T4", output_root=root, poll_interval_s=0, sleep=lambda s: None)


def _request(job_id: str, **params: object) -> JobRequest:
    return JobRequest.model_validate({"job_id": job_id, "type": "noop", "params": params, "timeout_s": 120})


def test_custom_job_is_named_and_sized_from_settings() -> None:
    spec = _backend(RecordingJobService(JobState.JOB_STATE_SUCCEEDED), "memory://v").custom_job(_request("j1"), 2)
    assert spec["display_name"] == "gpu-runtime-j1"
    pool = spec["job_spec"]["worker_pool_specs"][0]
    assert pool["machine_spec"] == {"machine_type": "n1-standard-8", "accelerator_type": "NVIDIA_TESLA_T4",
                                    "accelerator_count": 1}
    assert pool["container_spec"]["args"][-1] == "memory://v/j1/2"
    assert spec["job_spec"]["scheduling"]["timeout"] == {"seconds": 120}
    CustomJob(spec)  # the dict is a valid CustomJob message


def test_success_reads_back_what_the_task_wrote() -> None:
    root = "memory://vertex-ok"
    assert vertex_task_main(["--job-type", "noop", "--params", "{}", "--output", f"{root}/j2/1"]) == 0
    client = RecordingJobService(JobState.JOB_STATE_PENDING, JobState.JOB_STATE_RUNNING, JobState.JOB_STATE_SUCCEEDED)
    execution = _backend(client, root).run(_request("j2"), attempt=1)
    assert execution.summary["slept_s"] == 0.0
    assert [c[0] for c in client.calls] == ["create", "get", "get", "get"]


def test_failures_map_to_permanent_and_transient() -> None:
    root = "memory://vertex-fail"
    assert vertex_task_main(["--job-type", "noop", "--params", json.dumps({"fail": "permanent"}),
                             "--output", f"{root}/p/1"]) == 1
    with pytest.raises(PermanentJobError, match="simulated permanent"):
        _backend(RecordingJobService(JobState.JOB_STATE_FAILED), root).run(_request("p"), attempt=1)
    # No error file (the machine was preempted): worth another delivery.
    with pytest.raises(TransientJobError, match="preempted"):
        _backend(RecordingJobService(JobState.JOB_STATE_FAILED, error="preempted"), root).run(
            _request("gone"), attempt=1)
    assert not fsspec.filesystem("memory").exists("/vertex-fail/gone")


def test_cancel_cancels_the_custom_job() -> None:
    client = RecordingJobService(JobState.JOB_STATE_CANCELLED)
    backend = _backend(client, "memory://vertex-cancel")
    assert backend.cancel("nothing-running") is False
    with pytest.raises(JobCancelled):
        backend.run(_request("c"), attempt=1)


def test_a_job_stuck_in_provisioning_is_cancelled_and_transient() -> None:
    now = [0.0]
    client = RecordingJobService(JobState.JOB_STATE_PENDING)

    def sleep(seconds: float) -> None:
        now[0] += 600.0  # each poll, ten minutes pass

    backend = VertexBackend(client, project="p", region="r", image="img", machine_type="m", accelerator="a",
                            output_root="memory://vertex-stuck", poll_interval_s=0, sleep=sleep, clock=lambda: now[0])
    with pytest.raises(TransientJobError, match="did not finish"):
        backend.run(_request("stuck"), attempt=1)
    assert client.calls[-1] == ("cancel", {"name": JOB_NAME})
