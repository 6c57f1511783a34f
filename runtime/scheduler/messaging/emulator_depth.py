"""Backlog depth from the local emulator's admin ``GET /stats`` (the emulator's own, not a Pub/Sub API)."""

from __future__ import annotations

from typing import Final

import httpx

STATS_TIMEOUT_S: Final = 2.0


class EmulatorDepth:
    """Reads ``undelivered`` per subscription from the emulator admin endpoint at ``admin_url``."""

    def __init__(self, admin_url: str, client: httpx.Client | None = None) -> None:
        self._url = admin_url.rstrip("/") + "/stats"
        self._client = client or httpx.Client(timeout=STATS_TIMEOUT_S)

    def undelivered(self, subscription: str) -> int | None:
        """Undelivered messages of ``subscription`` (short id), ``None`` if the emulator cannot say."""
        try:
            response = self._client.get(self._url)
            response.raise_for_status()
            subscriptions = response.json().get("subscriptions", {})
        except (httpx.HTTPError, ValueError):
            return None
        for name, stats in subscriptions.items():
            if subscription in (name, name.rsplit("/", 1)[-1]):
                return int(stats.get("undelivered", 0))
        return None
