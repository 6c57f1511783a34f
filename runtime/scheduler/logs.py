"""JSON log lines (one object per line) carrying ``job_id`` and other context given as ``extra``."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Final

# Attributes every LogRecord has; anything else on a record came from ``extra=`` and is logged.
_STANDARD: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Formats a record as ``{"time", "severity", "logger", "message", ...extra}`` (Cloud Logging reads it)."""

    def format(self, record: logging.LogRecord) -> str:
        """One JSON object."""
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "severity": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and value is not None:
                entry[key] = value if isinstance(value, str | int | float | bool) else str(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure(level: str) -> None:
    """Send all logging to stderr as JSON at ``level``."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # The Pub/Sub client logs every lease round at INFO; keep those out unless debugging.
    logging.getLogger("google.cloud.pubsub_v1").setLevel(max(logging.WARNING, logging.getLevelName(level)))
