"""The HTTP client at its seam: what it sends (auth, paths, bodies) and how it reports refusals."""

from __future__ import annotations

import json

import httpx
import pytest

from runtime.access.control_api import ApiClient, ApiError


class Recorder:
    """An httpx transport that records requests and answers from a table of canned responses."""

    def __init__(self, answers: dict[tuple[str, str], httpx.Response]) -> None:
        self.answers = answers
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answers.get((request.method, request.url.path), httpx.Response(404, json={"detail": "nope"}))


def client(recorder: Recorder, token: str | None = "tok") -> ApiClient:
    return ApiClient("http://scheduler", token, transport=httpx.MockTransport(recorder))


def test_mutating_calls_carry_the_bearer_token_and_body() -> None:
    recorder = Recorder({("POST", "/pools/local/scale"): httpx.Response(200, json={"pool": "local", "workers": 3}),
                         ("POST", "/control/maintenance"): httpx.Response(200, json={"mode": "drain"})})
    with client(recorder) as api:
        api.scale_pool("local", 3)
        api.set_maintenance("drain")

    assert [r.headers["authorization"] for r in recorder.requests] == ["Bearer tok", "Bearer tok"]
    assert [json.loads(r.content) for r in recorder.requests] == [{"workers": 3}, {"mode": "drain"}]


def test_refusal_becomes_api_error_with_the_servers_reason() -> None:
    recorder = Recorder({("POST", "/pools/stop-all"): httpx.Response(401, json={"detail": "missing bearer token"})})
    with client(recorder, token=None) as api, pytest.raises(ApiError, match="401: missing bearer token") as info:
        api.stop_all_pools()
    assert info.value.status == 401
    assert "authorization" not in recorder.requests[0].headers


def test_unreachable_scheduler_is_a_clear_error() -> None:
    with ApiClient("http://127.0.0.1:9", "t", timeout_s=1) as api, pytest.raises(ApiError, match="cannot reach"):
        api.healthz()
    with ApiClient("http://127.0.0.1:9", "t", timeout_s=1) as api:
        assert api.is_ready() is False


def test_pools_and_jobs_are_typed() -> None:
    recorder = Recorder({
        ("GET", "/pools"): httpx.Response(200, json={"pools": [{"id": "local", "workers": 2, "desired": 2}]}),
        ("GET", "/jobs/j1"): httpx.Response(200, json={
            "job_id": "j1", "state": "succeeded", "attempt": 1,
            "result": {"job_id": "j1", "status": "succeeded", "attempt": 1}}),
    })
    with client(recorder) as api:
        (pool,) = api.pools()
        job = api.get_job("j1")
    assert (pool.id, pool.workers, pool.desired) == ("local", 2, 2)
    assert job.result is not None and job.result.status == "succeeded" and job.state == "succeeded"
