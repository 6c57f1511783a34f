"""Secure by default: with no control token configured every mutating endpoint refuses, health stays open."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from components import contract
from runtime.scheduler.api import create_app
from runtime.scheduler.service import Service
from runtime.scheduler.settings import Settings

MUTATING = [("post", "/control/maintenance", {"mode": "drain"}), ("post", "/pools/local/stop", None),
            ("post", "/pools/stop-all", None), ("post", "/pools/local/scale", {"workers": 1}),
            ("delete", "/jobs/j1", None)]


def _client(env: dict[str, str]) -> TestClient:
    service = Service(Settings.from_env({"GPURT_RESULT_STORE": "memory://api-auth", **env}))
    return TestClient(create_app(service))


@pytest.mark.parametrize("method, path, body", MUTATING)
def test_without_a_configured_token_control_is_disabled(method: str, path: str, body: dict | None) -> None:
    response = getattr(_client({}), method)(path, **({"json": body} if body else {}))
    assert response.status_code == 503
    assert contract.CONTROL_TOKEN_ENV in response.json()["detail"]


@pytest.mark.parametrize("method, path, body", MUTATING)
def test_with_a_token_a_missing_or_wrong_one_is_401(method: str, path: str, body: dict | None) -> None:
    client = _client({contract.CONTROL_TOKEN_ENV: "right"})
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic right"}):
        response = getattr(client, method)(path, headers=headers, **({"json": body} if body else {}))
        assert response.status_code == 401, (path, headers)


def test_health_is_open_and_readiness_says_why_not() -> None:
    client = _client({})
    assert client.get(contract.HEALTH_PATH).json() == contract.HEALTH_BODY
    ready = client.get(contract.READY_PATH)
    assert ready.status_code == 503 and ready.json()["reasons"] == ["not started"]
    assert "/control/maintenance" in client.get("/openapi.json").json()["paths"]
