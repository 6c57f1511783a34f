"""What ``gpurt alerts list`` shows: alerts pending or firing in Prometheus, and the notifications received."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from runtime.access.alert_notifications import Notification, read_log
from runtime.access.prometheus_api import ActiveAlert, PrometheusApi


class AlertsOverview(BaseModel):
    """Prometheus' active alerts and the receiver's log, at one moment."""

    prometheus_url: str
    alerts: list[ActiveAlert]
    notifications: list[Notification]
    unreadable_notifications: list[str] = []


def collect_overview(prometheus_url: str, notifications_file: Path | None) -> AlertsOverview:
    """Ask Prometheus for its alerts (``PrometheusError`` if unreachable) and read the recorded notifications."""
    with PrometheusApi(prometheus_url) as api:
        active = sorted(api.alerts(), key=lambda a: (a.state != "firing", a.name))
    log = read_log(notifications_file) if notifications_file is not None else None
    return AlertsOverview(prometheus_url=prometheus_url, alerts=active,
                          notifications=log.notifications if log else [],
                          unreadable_notifications=log.unreadable if log else [])
