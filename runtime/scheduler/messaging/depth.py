"""How many messages wait on a subscription: the backlog and dead-letter depth metrics.

In the cloud the number comes from Cloud Monitoring
(``pubsub.googleapis.com/subscription/num_undelivered_messages``, sampled every minute); locally from
the emulator's admin statistics. Both sit behind ``DepthSource`` so the scheduler does not care which.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final, Protocol

UNDELIVERED_METRIC: Final = "pubsub.googleapis.com/subscription/num_undelivered_messages"
# Cloud Monitoring samples Pub/Sub every 60 s and publishes with a delay of up to a few minutes: look
# back far enough to always find the latest point.
LOOKBACK_S: Final = 300


class DepthSource(Protocol):
    """Counts undelivered messages of a subscription; ``None`` when it cannot tell right now."""

    def undelivered(self, subscription: str) -> int | None:
        """Messages on ``subscription`` not yet acknowledged."""
        ...


class MonitoringDepth:
    """Reads the latest ``num_undelivered_messages`` point from Cloud Monitoring."""

    def __init__(self, project: str, client: Any = None, clock: Callable[[], float] = time.time) -> None:
        self._project = project
        self._client = client
        self._clock = clock

    def undelivered(self, subscription: str) -> int | None:
        """The most recent sample for ``subscription``, or ``None`` if Monitoring has none yet."""
        from google.cloud import monitoring_v3

        if self._client is None:
            self._client = monitoring_v3.MetricServiceClient()
        now = self._clock()
        interval = monitoring_v3.TimeInterval(
            {"end_time": {"seconds": int(now)}, "start_time": {"seconds": int(now) - LOOKBACK_S}}
        )
        series = self._client.list_time_series(
            request={
                "name": f"projects/{self._project}",
                "filter": (
                    f'metric.type = "{UNDELIVERED_METRIC}" AND '
                    f'resource.labels.subscription_id = "{subscription}"'
                ),
                "interval": interval,
                "view": monitoring_v3.ListTimeSeriesRequest.TimeSeriesView.FULL,
            }
        )
        for one in series:
            # Points come newest first.
            for point in one.points:
                return int(point.value.int64_value)
        return None


class NoDepth:
    """For deployments without a depth source: the metrics stay unset rather than lie."""

    def undelivered(self, subscription: str) -> int | None:
        """Always unknown."""
        return None
