"""Alertmanager's webhook notifications as typed records, and the file the local receiver records them in.

The receiver appends one JSON line per notification (``notifications.jsonl`` under the monitoring
folder); ``gpurt alerts list`` and the alert drill read it back. A line that cannot be parsed is reported,
never silently dropped.

The file's format is what a running local platform records for those outside it to read, like its state file
(``local_state``), so it sits in the access layer: validation reads it without importing the local platform.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runtime.access.prometheus_api import LabelledAlert

NOTIFICATIONS_FILE: Final = "notifications.jsonl"


class NotifiedAlert(LabelledAlert):
    """One alert inside a notification (Alertmanager webhook format, version 4)."""

    status: str  # firing | resolved
    starts_at: datetime = Field(alias="startsAt")
    ends_at: datetime | None = Field(None, alias="endsAt")
    fingerprint: str = ""


class WebhookPayload(BaseModel):
    """The body Alertmanager POSTs to a webhook receiver."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    receiver: str
    status: str
    alerts: list[NotifiedAlert]
    group_labels: dict[str, str] = Field(default_factory=dict, alias="groupLabels")


class Notification(BaseModel):
    """A payload as recorded: when it arrived and on which receiver path."""

    received_at: datetime
    path: str
    payload: WebhookPayload


class NotificationLog(BaseModel):
    """Everything the receiver recorded, and the lines it could not read."""

    notifications: list[Notification] = []
    unreadable: list[str] = []

    def first(self, alert: str, status: str, after: datetime | None = None) -> Notification | None:
        """The first notification carrying ``alert`` with ``status`` (firing/resolved), received after ``after``."""
        for notification in self.notifications:
            if after is not None and notification.received_at < after:
                continue
            if any(a.name == alert and a.status == status for a in notification.payload.alerts):
                return notification
        return None


def record(path: Path, request_path: str, body: bytes, now: datetime | None = None) -> Notification:
    """Validate ``body`` as a webhook payload and append it to ``path``; ``ValidationError`` if it is not one."""
    payload = WebhookPayload.model_validate_json(body)
    notification = Notification(received_at=now or datetime.now(UTC), path=request_path, payload=payload)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(notification.model_dump_json(by_alias=True) + "\n")
    return notification


def read_log(path: Path) -> NotificationLog:
    """Every notification recorded in ``path`` (none if the file does not exist yet)."""
    log = NotificationLog()
    if not path.exists():
        return log
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            log.notifications.append(Notification.model_validate_json(line))
        except ValidationError:
            log.unreadable.append(line)
    return log
