"""Secure by default: every endpoint but health, readiness, metrics and the API description needs the token.

With no token configured those endpoints refuse (503); with one, a missing or wrong token gets 401. Reads
are guarded as well as control: a job's result is the user's risk figures, and ``/status`` names the store.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from runtime.protocol import contract
from runtime.scheduler.api import create_app
from runtime.scheduler.service import Service
from runtime.scheduler.settings import Settings

MUTATING = [("post", "/control/maintenance", {"mode": "drain"}), ("post", "/pools/local/stop", None),
            ("post", "/pools/stop-all", None), ("post", "/pools/local/scale", {"workers": 1}),
            ("delete", "/jobs/j1", None)]
READS = [("get", "/jobs/j1", None), ("get", "/jobs?session_id=desk", None), ("get", "/status", None),
         ("get", "/status/leader", None), ("get", "/pools", None)]


def _client(env: dict[str, str]) -> TestClient:
    service = Service(Settings.from_env({"GPURT_RESULT_STORE": "memory://api-auth", **env}))
    return TestClient(create_app(service))


@pytest.mark.parametrize("method, path, body", MUTATING + READS)
def test_without_a_configured_token_control_is_disabled(method: str, path: str, body: dict | None) -> None:
    response = getattr(_client({}), method)(path, **({"json": body} if body else {}))
    assert response.status_code == 503
    assert contract.SchedulerEnv.CONTROL_TOKEN in response.json()["detail"]


@pytest.mark.parametrize("method, path, body", MUTATING + READS)
def test_with_a_token_a_missing_or_wrong_one_is_401(method: str, path: str, body: dict | None) -> None:
    client = _client({contract.SchedulerEnv.CONTROL_TOKEN: "right"})
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic right"}):
        response = getattr(client, method)(path, headers=headers, **({"json": body} if body else {}))
        assert response.status_code == 401, (path, headers)


def test_health_is_open_and_readiness_says_why_not_only_to_the_tokens_holder() -> None:
    client = _client({contract.SchedulerEnv.CONTROL_TOKEN: "right"})
    assert client.get(contract.HEALTH_PATH).json() == contract.HEALTH_BODY
    ready = client.get(contract.READY_PATH, headers={"Authorization": "Bearer right"})
    assert ready.status_code == 503 and ready.json()["reasons"] == ["not started"]
    assert "/control/maintenance" in client.get("/openapi.json").json()["paths"]


@pytest.mark.parametrize("env", [{}, {contract.SchedulerEnv.CONTROL_TOKEN: "right"}])
def test_readiness_tells_an_unauthenticated_caller_its_status_alone(env: dict[str, str]) -> None:
    # issue 43: during a store outage /readyz named the result store's path and a job id to anyone
    service = Service(Settings.from_env({"GPURT_RESULT_STORE": "memory://api-auth", **env}))
    secret = "the result store is unavailable, intake stopped: write of /srv/results/job-7/result.json failed"
    service.readiness = lambda: [secret]  # type: ignore[method-assign]
    client = TestClient(create_app(service))
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        ready = client.get(contract.READY_PATH, headers=headers)
        assert ready.status_code == 503 and ready.json() == {"ready": False}, headers
        assert "/srv/results" not in ready.text and "job-7" not in ready.text


def test_probes_metrics_and_the_api_description_stay_open_with_a_token_configured() -> None:
    client = _client({contract.SchedulerEnv.CONTROL_TOKEN: "right"})
    assert client.get(contract.HEALTH_PATH).status_code == 200
    assert client.get(contract.READY_PATH).status_code == 503  # not started: open, and says so
    assert client.get(contract.METRICS_PATH).status_code == 200
    assert client.get("/openapi.json").status_code == 200


@pytest.mark.parametrize("method", ["get", "delete"])
def test_a_job_id_with_a_final_newline_is_refused(method: str) -> None:
    client = _client({contract.SchedulerEnv.CONTROL_TOKEN: "right"})
    response = getattr(client, method)("/jobs/abc%0A", headers={"Authorization": "Bearer right"})
    assert response.status_code == 422 and "not a valid job id" in response.json()["detail"]
