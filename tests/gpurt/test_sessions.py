"""Jobs by session, from the result store through the scheduler's API and its client to ``gpurt jobs list|collect``.

The scheduler here is the real app over a memory store (no Dask, no broker): the store holds what the processor
writes for a session (a start marker per job, the result once it has one), and the CLI talks to the app through
an httpx transport that hands each call to it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from gpurt.cli import jobs as jobs_commands
from gpurt.cli.app import app
from runtime.access.control_api import ApiClient, ApiError
from runtime.protocol.contract import SchedulerEnv
from runtime.protocol.messages import JobResult, JobStatus, JobType
from runtime.scheduler.api import create_app
from runtime.scheduler.service import UNFINISHED, Service
from runtime.scheduler.settings import Settings

TOKEN = "session-test-token"
runner = CliRunner()


@pytest.fixture
def service() -> Service:
    service = Service(Settings.from_env({SchedulerEnv.RESULT_STORE: f"memory://sessions-{uuid.uuid4().hex}",
                                         SchedulerEnv.CONTROL_TOKEN: TOKEN}))
    for job_id in ("desk-a", "desk-b", "desk-c"):
        service.store.add_to_session("desk", job_id)
    service.store.put(JobResult(job_id="desk-a", status=JobStatus.SUCCEEDED, type=JobType.EUROPEAN_OPTION,
                                session_id="desk", result={"estimate": 10.45, "std_error": 0.01}))
    service.store.put(JobResult(job_id="desk-b", status=JobStatus.FAILED, session_id="desk"))
    service.store.add_to_session("other", "other-a")
    return service


@pytest.fixture
def api(service: Service, monkeypatch: pytest.MonkeyPatch) -> Iterator[ApiClient]:
    """An API client of ``service``'s app, also handed to the CLI's commands."""
    server = TestClient(create_app(service))

    def forward(request: httpx.Request) -> httpx.Response:
        answer = server.request(request.method, request.url.path, params=request.url.params,
                                headers=dict(request.headers))
        return httpx.Response(answer.status_code, content=answer.content, headers=answer.headers)

    def connect(api_url: str | None = None) -> ApiClient:
        return ApiClient("http://scheduler", TOKEN, transport=httpx.MockTransport(forward))

    monkeypatch.setattr(jobs_commands, "api_client", connect)  # each command closes its client
    with connect() as client:
        yield client
    server.close()


def test_the_api_lists_a_sessions_jobs_with_their_results(api: ApiClient) -> None:
    jobs = {job.job_id: job for job in api.session_jobs("desk")}

    assert list(jobs) == ["desk-a", "desk-b", "desk-c"]
    assert jobs["desk-a"].state == "succeeded" and jobs["desk-a"].result.result["estimate"] == 10.45
    assert jobs["desk-b"].state == "failed"
    assert jobs["desk-c"].state == UNFINISHED and jobs["desk-c"].result is None
    assert [job.job_id for job in api.session_jobs("nobody")] == []


def test_a_session_id_the_protocol_refuses_is_refused_by_the_api(api: ApiClient) -> None:
    with pytest.raises(ApiError, match="422"):
        api.session_jobs("s" * 129)


def test_gpurt_jobs_list_shows_each_job_and_its_state(api: ApiClient) -> None:
    shown = runner.invoke(app, ["jobs", "list", "--session", "desk"])
    assert shown.exit_code == 0, shown.output
    for text in ("session desk: 3 jobs", "desk-a", "succeeded", "european_option", "desk-b", "failed", "desk-c",
                 UNFINISHED):
        assert text in shown.output
    as_json = runner.invoke(app, ["jobs", "list", "--session", "desk", "--json"])
    assert [job["state"] for job in json.loads(as_json.output)] == ["succeeded", "failed", UNFINISHED]
    assert "no jobs for session nobody" in runner.invoke(app, ["jobs", "list", "--session", "nobody"]).output


def test_gpurt_jobs_collect_gives_the_finished_results_and_says_what_is_missing(api: ApiClient,
                                                                                tmp_path: Path) -> None:
    collected = runner.invoke(app, ["jobs", "collect", "--session", "desk"])
    # One job has no result yet: the results so far, and exit 3 (as `submit --wait` on a timeout).
    assert collected.exit_code == 3
    results = json.loads(collected.stdout)
    assert [(r["job_id"], r["status"], r["session_id"]) for r in results] == [
        ("desk-a", "succeeded", "desk"), ("desk-b", "failed", "desk")]
    assert "1 of 3 jobs have no result yet: desk-c" in collected.stderr

    out = tmp_path / "other.json"
    written = runner.invoke(app, ["jobs", "collect", "--session", "other", "--out", str(out)])
    assert written.exit_code == 3 and json.loads(out.read_text()) == []


def test_gpurt_submit_sets_the_session_of_the_request() -> None:
    request = jobs_commands.build_request(None, "noop", [], "j1", session_id="desk")
    assert request.session_id == "desk"


def test_gpurt_submit_no_cache_opts_the_request_out_of_the_result_cache() -> None:
    assert jobs_commands.build_request(None, "noop", [], "j1").to_message()[0].find(b"cache") == -1
    request = jobs_commands.build_request(None, "noop", [], "j1", cache=False)
    assert request.cache is False and b'"cache":false' in request.to_message()[0]
