"""Vertex AI backend at its client seam, and the REST client against the service's discovery document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fsspec
import googleapiclient
import pytest

from kernels.errors import JobCancelled, PermanentJobError, TransientJobError
from runtime.protocol.messages import JobRequest
from runtime.scheduler.backends.vertex import VertexBackend
from runtime.vertex.rest import RestCustomJobs, VertexApiError
from runtime.worker.vertex_task import main as vertex_task_main
from runtime.worker.vertex_task import task_args

JOB_NAME = "projects/123/locations/us-central1/customJobs/4567"
# Google's published description of the v1 REST surface (shipped with google-api-python-client).
DISCOVERY = json.loads((Path(googleapiclient.__file__).parent / "discovery_cache" / "documents" /
                        "aiplatform.v1.json").read_text())


class RecordingJobService:
    """Answers create/get/cancel like the Vertex AI service, walking through ``states``."""

    def __init__(self, *states: str, error: str = "") -> None:
        self.states = list(states)
        self.error = error
        self.calls: list[tuple[str, dict]] = []

    def _job(self, state: str, display_name: str = "") -> dict[str, Any]:
        job: dict[str, Any] = {"name": JOB_NAME, "displayName": display_name, "state": state}
        if self.error:
            job["error"] = {"code": 13, "message": self.error}
        return job

    def create(self, parent: str, custom_job: dict) -> dict[str, Any]:
        self.calls.append(("create", {"parent": parent, "custom_job": custom_job}))
        # What the job will read: the params the backend wrote before creating it.
        params_url = custom_job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"][3]
        with fsspec.open(params_url, "rb") as handle:
            self.params_seen = json.loads(handle.read())
        return self._job("JOB_STATE_QUEUED", custom_job["displayName"])

    def get(self, name: str) -> dict[str, Any]:
        self.calls.append(("get", {"name": name}))
        return self._job(self.states.pop(0) if len(self.states) > 1 else self.states[0])

    def cancel(self, name: str) -> None:
        self.calls.append(("cancel", {"name": name}))

    def list(self, parent: str, *, filter: str, page_size: int) -> list[dict[str, Any]]:
        raise NotImplementedError


def _schema_errors(value: Any, schema: dict[str, Any], at: str = "") -> list[str]:
    """Where ``value`` strays from a discovery-document schema: unknown fields and JSON types."""
    if "$ref" in schema:
        schema = DISCOVERY["schemas"][schema["$ref"]]
    kind = schema.get("type")
    if kind == "object" and "properties" in schema:
        if not isinstance(value, dict):
            return [f"{at}: expected an object"]
        errors = [f"{at}.{key}: not a field" for key in value if key not in schema["properties"]]
        for key, item in value.items():
            if key in schema["properties"]:
                errors += _schema_errors(item, schema["properties"][key], f"{at}.{key}")
        return errors
    if kind == "object":  # a map
        return [e for k, v in value.items() for e in _schema_errors(v, schema["additionalProperties"], f"{at}[{k}]")]
    if kind == "array":
        return [e for i, v in enumerate(value) for e in _schema_errors(v, schema["items"], f"{at}[{i}]")]
    expected = {"string": str, "integer": int, "boolean": bool, "number": (int, float)}[kind]
    return [] if isinstance(value, expected) else [f"{at}: expected {kind}, got {value!r}"]


def _backend(client: RecordingJobService, root: str) -> VertexBackend:
    return VertexBackend(client, project="p", region="us-central1", image="img:sha", machine_type="n1-standard-8",
                         accelerator="NVIDIA_TESLA_T4", output_root=root, poll_interval_s=0, sleep=lambda s: None)


def _request(job_id: str, **params: object) -> JobRequest:
    return JobRequest.model_validate({"job_id": job_id, "type": "noop", "params": params, "timeout_s": 120})


def _task(output: str, params: dict[str, Any]) -> int:
    """Run the custom job's entry point as Vertex AI would, with ``params`` where the scheduler puts them."""
    args = task_args("noop", output)
    with fsspec.open(args[3], "w") as handle:
        handle.write(json.dumps(params))
    return vertex_task_main(args)


def test_custom_job_is_named_and_sized_from_settings() -> None:
    spec = _backend(RecordingJobService("JOB_STATE_SUCCEEDED"), "memory://v").custom_job(_request("j1"), 2)
    assert spec["displayName"] == "gpu-runtime-j1"
    pool = spec["jobSpec"]["workerPoolSpecs"][0]
    assert pool["machineSpec"] == {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4",
                                   "acceleratorCount": 1}
    assert pool["containerSpec"]["args"][-1] == "memory://v/j1/2"
    assert spec["jobSpec"]["scheduling"]["timeout"] == "120s"
    assert _schema_errors(spec, {"$ref": "GoogleCloudAiplatformV1CustomJob"}) == []


def test_custom_job_asks_for_the_stacks_gpu_count() -> None:
    backend = VertexBackend(RecordingJobService("JOB_STATE_SUCCEEDED"), project="p", region="r", image="img",
                            machine_type="a2-highgpu-2g", accelerator="NVIDIA_TESLA_A100", accelerator_count=2,
                            output_root="memory://v")
    machine = backend.custom_job(_request("j1"), 1)["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]
    assert machine == {"machineType": "a2-highgpu-2g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 2}


def test_the_schema_check_catches_a_misspelt_field() -> None:
    spec = _backend(RecordingJobService("JOB_STATE_SUCCEEDED"), "memory://v").custom_job(_request("j1"), 2)
    spec["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["accelerator_count"] = 1
    spec["jobSpec"]["scheduling"]["timeout"] = 120
    assert _schema_errors(spec, {"$ref": "GoogleCloudAiplatformV1CustomJob"}) == [
        ".jobSpec.workerPoolSpecs[0].machineSpec.accelerator_count: not a field",
        ".jobSpec.scheduling.timeout: expected string, got 120"]


def test_success_reads_back_what_the_task_wrote() -> None:
    root = "memory://vertex-ok"
    assert _task(f"{root}/j2/1", {}) == 0
    client = RecordingJobService("JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED")
    execution = _backend(client, root).run(_request("j2", sleep_s=0.0), attempt=1)
    assert execution.summary["slept_s"] == 0.0
    assert [c[0] for c in client.calls] == ["create", "get", "get", "get"]
    # The job found its params beside its output, and they are gone once it has ended.
    assert client.params_seen == {"sleep_s": 0.0, "fail": None}
    assert not fsspec.filesystem("memory").exists("/vertex-ok/j2/1/params.json")


def test_params_travel_by_reference_not_as_an_argument() -> None:
    # 256 assets' positions: ~390 KB of JSON, three times what Linux allows one argument (MAX_ARG_STRLEN).
    assets = 256
    params = {"exposures": [1e6] * assets, "volatilities": [0.2] * assets,
              "correlation": [[1.0 if i == j else 0.25 for j in range(assets)] for i in range(assets)]}
    request = JobRequest.model_validate({"job_id": "big", "type": "portfolio_var", "params": params, "timeout_s": 60})
    spec = _backend(RecordingJobService("JOB_STATE_SUCCEEDED"), "memory://v").custom_job(request, 1)
    args = spec["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"]
    assert args == ["--job-type", "portfolio_var", "--params-url", "memory://v/big/1/params.json",
                    "--output", "memory://v/big/1"]
    assert len(json.dumps(spec)) < 1024


def test_params_are_removed_when_the_job_cannot_even_be_created() -> None:
    class Refusing(RecordingJobService):
        def create(self, parent: str, custom_job: dict) -> dict[str, Any]:
            raise VertexApiError("Vertex AI POST failed with PERMISSION_DENIED")

    with pytest.raises(VertexApiError):
        _backend(Refusing("JOB_STATE_SUCCEEDED"), "memory://vertex-refused").run(_request("r"), attempt=1)
    assert not fsspec.filesystem("memory").exists("/vertex-refused/r/1/params.json")


def test_failures_map_to_permanent_and_transient() -> None:
    root = "memory://vertex-fail"
    assert _task(f"{root}/p/1", {"fail": "permanent"}) == 1
    with pytest.raises(PermanentJobError, match="simulated permanent"):
        _backend(RecordingJobService("JOB_STATE_FAILED"), root).run(_request("p"), attempt=1)
    # No error file (the machine was preempted): worth another delivery.
    with pytest.raises(TransientJobError, match="preempted"):
        _backend(RecordingJobService("JOB_STATE_FAILED", error="preempted"), root).run(
            _request("gone"), attempt=1)
    assert fsspec.filesystem("memory").find("/vertex-fail/gone") == []  # no error file, and no params left


def test_cancel_cancels_the_custom_job() -> None:
    client = RecordingJobService("JOB_STATE_CANCELLED")
    backend = _backend(client, "memory://vertex-cancel")
    assert backend.cancel("nothing-running") is False
    with pytest.raises(JobCancelled):
        backend.run(_request("c"), attempt=1)


def test_a_cancel_that_came_while_the_job_was_created_cancels_it() -> None:
    # The overflow's cancel sets its flag, then asks the backend, which knows no job yet: run cancels it once created.
    client = RecordingJobService("JOB_STATE_CANCELLED")
    with pytest.raises(JobCancelled):
        _backend(client, "memory://vertex-cancel-early").run(_request("early"), attempt=1, cancelled=lambda: True)
    assert [c[0] for c in client.calls][:2] == ["create", "cancel"]


def test_a_job_stuck_in_provisioning_is_cancelled_and_transient() -> None:
    now = [0.0]
    client = RecordingJobService("JOB_STATE_PENDING")

    def sleep(seconds: float) -> None:
        now[0] += 600.0  # each poll, ten minutes pass

    backend = VertexBackend(client, project="p", region="r", image="img", machine_type="m", accelerator="a",
                            output_root="memory://vertex-stuck", poll_interval_s=0, sleep=sleep, clock=lambda: now[0])
    with pytest.raises(TransientJobError, match="did not finish"):
        backend.run(_request("stuck"), attempt=1)
    assert client.calls[-1] == ("cancel", {"name": JOB_NAME})


class _Response:
    def __init__(self, status: int, body: Any) -> None:
        self.status_code = status
        self.text = json.dumps(body)
        self.content = self.text.encode()

    def json(self) -> Any:
        return json.loads(self.text)


class RecordingSession:
    """Stands in for ``AuthorizedSession``: records each request and answers ``answer``."""

    def __init__(self, answer: _Response) -> None:
        self.answer = answer
        self.requests: list[tuple[str, str, dict]] = []

    def request(self, method: str, url: str, **kwargs: Any) -> _Response:
        self.requests.append((method, url, kwargs))
        return self.answer


def _discovery_call(method: str, **fields: str) -> tuple[str, str]:
    """The HTTP method and URL that the discovery document gives for a customJobs method."""
    methods = DISCOVERY["resources"]["projects"]["resources"]["locations"]["resources"]["customJobs"]["methods"]
    spec = methods[method]
    path = spec["path"]
    for key, value in fields.items():
        path = path.replace(f"{{+{key}}}", value)
    return spec["httpMethod"], f"https://us-central1-aiplatform.googleapis.com/{path}"


def test_rest_client_calls_the_documented_methods() -> None:
    session = RecordingSession(_Response(200, {"name": JOB_NAME, "state": "JOB_STATE_QUEUED"}))
    jobs = RestCustomJobs("us-central1", session)
    parent = "projects/p/locations/us-central1"
    assert jobs.create(parent, {"displayName": "gpu-runtime-x"})["name"] == JOB_NAME
    jobs.get(JOB_NAME)
    jobs.cancel(JOB_NAME)
    session.answer = _Response(200, {"customJobs": [{"displayName": "gpu-runtime-a"}]})
    assert jobs.list(parent, filter='display_name:"gpu-runtime-*"', page_size=5) == [{"displayName": "gpu-runtime-a"}]

    assert [(m, u) for m, u, _ in session.requests] == [
        _discovery_call("create", parent=parent), _discovery_call("get", name=JOB_NAME),
        _discovery_call("cancel", name=JOB_NAME), _discovery_call("list", parent=parent)]
    assert session.requests[0][2]["json"] == {"displayName": "gpu-runtime-x"}
    assert session.requests[3][2]["params"] == {"filter": 'display_name:"gpu-runtime-*"', "pageSize": 5}
    assert all(kwargs["timeout"] > 0 for _, _, kwargs in session.requests)


def test_rest_errors_carry_the_service_status() -> None:
    session = RecordingSession(_Response(403, {"error": {"code": 403, "status": "PERMISSION_DENIED",
                                                         "message": "aiplatform.customJobs.create denied"}}))
    with pytest.raises(VertexApiError, match=r"PERMISSION_DENIED: aiplatform\.customJobs\.create denied"):
        RestCustomJobs("us-central1", session).create("projects/p/locations/us-central1", {})
