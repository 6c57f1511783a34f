"""What the local platform records about its monitoring: where Prometheus, Alertmanager and the receiver run."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict


class MonitoringInfo(BaseModel):
    """Monitoring of one local platform, saved in its state file (no secret in it)."""

    model_config = ConfigDict(frozen=True)

    prometheus_url: str
    alertmanager_url: str
    receiver_url: str
    directory: Path  # configuration, TSDB, Alertmanager data and the notification file
    notifications_file: Path
    alert_time_scale: float  # 1: the cloud's for: windows and ranges; below 1: shortened (drills)
    scrape_interval_s: float
    evaluation_interval_s: float
