"""A small reader of Prometheus' HTTP API (``/api/v1``): rules, targets, alerts, instant and range queries.

Answers come back as typed records; an unreachable server or an API error raises ``PrometheusError``
with what was asked and why it failed.

A client of a platform's monitoring, as ``control_api`` is of its scheduler: the local platform's status and
report, ``gpurt alerts`` and the alert drill read Prometheus through it, so it sits in the access layer, below
the local platform that runs the server (validation may not import ``runtime.local``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

import httpx
from pydantic import BaseModel, ConfigDict, Field

TIMEOUT_S: Final = 10.0


class PrometheusError(RuntimeError):
    """Prometheus could not be reached or refused the request; the message says which and why."""


class RuleState(BaseModel):
    """One rule as Prometheus evaluates it (``/api/v1/rules``)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str
    type: str  # alerting | recording
    health: str  # ok | err | unknown
    last_error: str = Field("", alias="lastError")
    state: str = "inactive"  # alerting rules: inactive | pending | firing
    duration: float = 0.0  # the rule's for: in seconds


class RuleGroupState(BaseModel):
    """A rule group and its rules."""

    model_config = ConfigDict(extra="ignore")

    name: str
    rules: list[RuleState]


class Target(BaseModel):
    """One scrape target (``/api/v1/targets``)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    job: str = Field(alias="scrapePool")
    url: str = Field(alias="scrapeUrl")
    health: str  # up | down | unknown
    last_error: str = Field("", alias="lastError")


class LabelledAlert(BaseModel):
    """An alert as Prometheus and Alertmanager both describe it: its labels (``alertname`` among them) and
    annotations; each adds its own fields, and unknown ones are ignored."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    labels: dict[str, str]
    annotations: dict[str, str] = {}

    @property
    def name(self) -> str:
        """The ``alertname`` label."""
        return self.labels.get("alertname", "?")


class ActiveAlert(LabelledAlert):
    """A pending or firing alert (``/api/v1/alerts``)."""

    state: str  # pending | firing
    active_at: datetime | None = Field(None, alias="activeAt")
    value: str = ""


class Series(BaseModel):
    """One series of a range query: its labels and (unix time, value) points."""

    labels: dict[str, str]
    points: list[tuple[float, float]]


class PrometheusApi:
    """Reads one Prometheus server at ``base_url`` (close it, or use ``with``)."""

    def __init__(self, base_url: str, client: httpx.Client | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = client or httpx.Client(timeout=TIMEOUT_S)

    def __enter__(self) -> PrometheusApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def ready(self) -> bool:
        """Whether the server answers ``/-/ready`` (it has loaded its configuration and storage)."""
        try:
            return self._client.get(f"{self.base_url}/-/ready").status_code == 200
        except httpx.HTTPError:
            return False

    def rule_groups(self) -> list[RuleGroupState]:
        """Every loaded rule group with each rule's health and state."""
        return [RuleGroupState.model_validate(g) for g in self._get("rules")["groups"]]

    def targets(self) -> list[Target]:
        """The active scrape targets."""
        return [Target.model_validate(t) for t in self._get("targets", state="active")["activeTargets"]]

    def alerts(self) -> list[ActiveAlert]:
        """Alerts pending or firing now."""
        return [ActiveAlert.model_validate(a) for a in self._get("alerts")["alerts"]]

    def query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        """An instant query: (labels, value) per series."""
        data = self._get("query", query=expr)
        return [(item["metric"], float(item["value"][1])) for item in data.get("result", [])]

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> list[Series]:
        """A range query between unix times ``start`` and ``end`` every ``step_s`` seconds."""
        data = self._get("query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=f"{step_s:g}s")
        return [Series(labels=item["metric"], points=[(float(t), float(v)) for t, v in item["values"]])
                for item in data.get("result", [])]

    def _get(self, endpoint: str, **params: str) -> dict[str, Any]:
        url = f"{self.base_url}/api/v1/{endpoint}"
        try:
            response = self._client.get(url, params=params)
        except httpx.HTTPError as exc:
            raise PrometheusError(f"Prometheus at {self.base_url} is unreachable ({exc})") from None
        try:
            body = response.json()
        except ValueError:
            raise PrometheusError(f"{url} answered {response.status_code} with no JSON body") from None
        if body.get("status") != "success":
            raise PrometheusError(f"{url} failed: {body.get('errorType', response.status_code)}: "
                                  f"{body.get('error', response.text[:200])}")
        return body["data"]
