"""Backlog depth seams: Cloud Monitoring (recorded real-format series) and the emulator's /stats."""

from __future__ import annotations

import httpx
from google.cloud import monitoring_v3

from runtime.protocol import contract
from runtime.scheduler.messaging.depth import UNDELIVERED_METRIC, MonitoringDepth
from runtime.scheduler.messaging.emulator_depth import EmulatorDepth


class RecordingMetricService:
    def __init__(self, series: list[monitoring_v3.TimeSeries]) -> None:
        self.series = series
        self.requests: list[dict] = []

    def list_time_series(self, request: dict) -> list[monitoring_v3.TimeSeries]:
        self.requests.append(request)
        return self.series


def _series(*values: int) -> monitoring_v3.TimeSeries:
    return monitoring_v3.TimeSeries({
        "metric": {"type": UNDELIVERED_METRIC},
        "resource": {"type": "pubsub_subscription", "labels": {"subscription_id": contract.REQUEST_SUBSCRIPTION}},
        "points": [{"interval": {"end_time": {"seconds": 1_700_000_000 - 60 * i}}, "value": {"int64_value": v}}
                   for i, v in enumerate(values)],
    })


def test_monitoring_reads_the_newest_point_of_the_subscription() -> None:
    client = RecordingMetricService([_series(42, 40, 7)])
    depth = MonitoringDepth("proj", client=client, clock=lambda: 1_700_000_000.0)
    assert depth.undelivered(contract.REQUEST_SUBSCRIPTION) == 42
    request = client.requests[0]
    assert request["name"] == "projects/proj"
    assert f'resource.labels.subscription_id = "{contract.REQUEST_SUBSCRIPTION}"' in request["filter"]
    assert MonitoringDepth("proj", client=RecordingMetricService([])).undelivered("x") is None


def test_emulator_stats_by_short_subscription_id() -> None:
    body = {"subscriptions": {f"projects/p/subscriptions/{contract.REQUEST_DLQ_SUBSCRIPTION}": {"undelivered": 3}},
            "published": {}}
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=body))
    depth = EmulatorDepth("http://emulator:1234", client=httpx.Client(transport=transport))
    assert depth.undelivered(contract.REQUEST_DLQ_SUBSCRIPTION) == 3
    assert depth.undelivered("unknown-sub") is None
    down = httpx.MockTransport(lambda request: httpx.Response(503))
    assert EmulatorDepth("http://e", client=httpx.Client(transport=down)).undelivered("x") is None
