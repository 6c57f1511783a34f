"""The local Vertex AI stand-in runs the worker's own task for the platform only, and nothing for anyone else.

The attacks are the re-test's (issue 43): a POST with no credentials and a shell command, the same with the
platform's token, and the worker's entry point bent to other files. Each must be refused with the status the
real custom-jobs API gives (401 ``UNAUTHENTICATED``, 400 ``INVALID_ARGUMENT``) and run nothing.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime.local.vertex_api import LOCAL_IMAGE, VertexApiHandle, start_vertex_api, worker_args
from runtime.protocol.messages import JobRequest
from runtime.scheduler.backends.vertex import VertexBackend
from runtime.vertex.rest import RestCustomJobs

TOKEN = "the-platform-token"
PARENT = "projects/p/locations/us-central1"
CREATE = f"/v1/{PARENT}/customJobs"


@pytest.fixture
def store(tmp_path: Path) -> str:
    return (tmp_path / "results").as_uri()


@pytest.fixture
def vertex(tmp_path: Path, store: str) -> Iterator[VertexApiHandle]:
    handle = start_vertex_api("127.0.0.1", 0, tmp_path / "custom-jobs", token=TOKEN, result_store=store)
    yield handle
    handle.stop()


def _backend(store: str) -> VertexBackend:
    return VertexBackend(RestCustomJobs("us-central1", endpoint="http://unused", token=TOKEN), project="p",
                         region="us-central1", image=LOCAL_IMAGE, machine_type="m", accelerator="a",
                         output_root=f"{store}/vertex", poll_interval_s=0.2)


def _request(job_id: str, job_type: str = "noop", **params: object) -> JobRequest:
    return JobRequest.model_validate({"job_id": job_id, "type": job_type, "params": params, "timeout_s": 300})


def _shell_job(marker: Path) -> dict[str, Any]:
    """The re-test's body: a custom job whose container runs a shell command."""
    return {"displayName": "x", "jobSpec": {"workerPoolSpecs": [{
        "replicaCount": "1", "machineSpec": {"machineType": "m"},
        "containerSpec": {"imageUri": "local", "command": ["sh", "-c", f"touch {marker}"], "args": []}}]}}


def _post(vertex: VertexApiHandle, body: object, token: str | None = TOKEN) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.post(vertex.url + CREATE, json=body, headers=headers, timeout=10)


def test_a_post_without_the_token_is_401_and_runs_nothing(vertex: VertexApiHandle, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    for token in (None, "wrong", f"{TOKEN}x"):
        answer = _post(vertex, _shell_job(marker), token)
        assert answer.status_code == 401
        assert answer.json()["error"]["status"] == "UNAUTHENTICATED"
        assert answer.headers["www-authenticate"] == "Bearer"
    # A browser's simple cross-origin POST carries no Authorization header and a text/plain body.
    answer = httpx.post(vertex.url + CREATE, content=json.dumps(_shell_job(marker)),
                        headers={"Content-Type": "text/plain", "Origin": "http://evil.example"}, timeout=10)
    assert answer.status_code == 401
    assert not marker.exists()
    assert vertex.jobs.list(PARENT, "", 10) == []


def test_reads_need_the_token_too(vertex: VertexApiHandle) -> None:
    assert httpx.get(vertex.url + CREATE, timeout=10).status_code == 401
    assert httpx.get(vertex.url + CREATE, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).status_code == 200


def test_the_platform_cannot_run_a_command_either(vertex: VertexApiHandle, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    answer = _post(vertex, _shell_job(marker))
    assert answer.status_code == 400
    assert answer.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert not marker.exists()


def _bent(store: str, change: str) -> dict[str, Any]:
    """The backend's own custom job, with one thing changed."""
    body = copy.deepcopy(_backend(store).custom_job(_request("j1"), 1))
    container = body["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
    args = container["args"]
    match change:
        case "python-c":
            container["command"] = ["python", "-c", "open('/tmp/pwned', 'w')"]
        case "extra-arg":
            args.append("--device=cpu")
        case "unknown-job-type":
            args[1] = "shell"
        case "output-elsewhere":
            args[-1] = args[-1].replace(store, "file:///tmp")
            args[3] = f"{args[-1]}/params.json"
        case "traversal":
            args[-1] = f"{store}/vertex/j1/1/../../../../etc"
        case "params-elsewhere":
            args[3] = "file:///etc/passwd"
        case "env":
            container["env"] = [{"name": "PYTHONSTARTUP", "value": "/tmp/x.py"}]
        case "two-pools":
            body["jobSpec"]["workerPoolSpecs"] *= 2
        case "other-image":
            container["imageUri"] = "evil:latest"
        case "unknown-field":
            body["jobSpec"]["baseOutputDirectory"] = {"outputUriPrefix": "gs://x"}
    return body


@pytest.mark.parametrize("change", ["python-c", "extra-arg", "unknown-job-type", "output-elsewhere", "traversal",
                                    "params-elsewhere", "env", "two-pools", "other-image", "unknown-field"])
def test_only_the_workers_own_task_is_accepted(vertex: VertexApiHandle, store: str, change: str) -> None:
    answer = _post(vertex, _bent(store, change))
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert vertex.jobs.list(PARENT, "", 10) == []


@pytest.mark.parametrize("body", [b"", b"{", b"[]", b"null", b'"x"', b"x" * 70_000])
def test_a_malformed_body_is_400(vertex: VertexApiHandle, body: bytes) -> None:
    answer = httpx.post(vertex.url + CREATE, content=body, timeout=10,
                        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    assert answer.status_code == 400
    assert answer.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_the_backends_custom_job_is_the_workers_task(store: str) -> None:
    body = _backend(store).custom_job(_request("book:1.a", "portfolio_var", **_portfolio(2)), 3)
    folder = f"{store}/vertex/book:1.a/3"
    assert worker_args(body, store) == ["--job-type", "portfolio_var", "--params-url", f"{folder}/params.json",
                                        "--output", folder]


def test_the_stand_in_refuses_to_start_without_a_token(tmp_path: Path, store: str) -> None:
    with pytest.raises(ValueError, match="needs a token"):
        start_vertex_api("127.0.0.1", 0, tmp_path, token="", result_store=store)


def _portfolio(assets: int) -> dict[str, Any]:
    return {"exposures": [1e6] * assets, "volatilities": [0.2] * assets, "paths": 1_000,
            "correlation": [[1.0 if i == j else 0.25 for j in range(assets)] for i in range(assets)]}


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_256_asset_portfolio_var_runs_through_the_stand_in(
        vertex: VertexApiHandle, store: str, tmp_path: Path) -> None:
    # Its params are ~390 KB of JSON: as one argument they exceeded Linux's 128 KiB MAX_ARG_STRLEN ("Argument
    # list too long"); by reference they are a file the task reads, and gone once the job has ended.
    params = _portfolio(256)
    assert len(json.dumps(params)) > 128 * 1024
    backend = VertexBackend(RestCustomJobs("us-central1", endpoint=vertex.url, token=TOKEN), project="p",
                            region="us-central1", image=LOCAL_IMAGE, machine_type="m", accelerator="a",
                            output_root=f"{store}/vertex", poll_interval_s=0.2)
    try:
        execution = backend.run(_request("var-256", "portfolio_var", **params), attempt=1)
    finally:
        backend.close()
    assert execution.summary["paths"] == 1_000 and execution.summary["var"] > 0
    job_folder = tmp_path / "results" / "vertex" / "var-256" / "1"
    assert (job_folder / "output.json").exists()
    assert not (job_folder / "params.json").exists()
    # Nobody saw the positions in the task's command line.
    custom = vertex.jobs.list(PARENT, "", 10)[0]
    assert all(len(arg) < 200 for arg in custom["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["args"])
