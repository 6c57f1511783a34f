"""Alerts as Prometheus lists them and as Alertmanager notifies them: one labelled-alert record underneath."""

from __future__ import annotations

from runtime.access.alert_notifications import NotifiedAlert
from runtime.access.prometheus_api import ActiveAlert


def test_prometheus_alerts_and_notified_alerts_are_named_by_their_alertname_label() -> None:
    active = ActiveAlert.model_validate({"labels": {"alertname": "QueueStalled"}, "state": "firing",
                                         "activeAt": "2026-01-01T00:00:00Z", "unknown": 1})
    notified = NotifiedAlert.model_validate({"labels": {}, "status": "resolved", "startsAt": "2026-01-01T00:00:00Z"})
    assert (active.name, active.annotations, notified.name) == ("QueueStalled", {}, "?")
