"""Live monitoring of the local platform: Prometheus evaluating the cloud's alert rules, Alertmanager routing
them by severity, and a webhook receiver recording the notifications (docs/local-platform.md)."""

from runtime.access.local_monitoring import MonitoringInfo

__all__ = ["MonitoringInfo"]
