"""Emulator-only admin view: ``GET /stats`` as JSON and ``GET /metrics`` for Prometheus, on an optional HTTP port.

The real Pub/Sub emulator has nothing like this; the local platform reads it for backlog and DLQ-depth
metrics, and validation for "DLQs are empty". Stats are also available in-process through
``EmulatorHandle.stats()``. ``/metrics`` serves per subscription the series Cloud Monitoring keeps for
Pub/Sub, under the names Managed Service for Prometheus queries them by (``contract.PUBSUB_METRICS``), so
the local Prometheus sees what the cloud's does.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from http import HTTPStatus

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from runtime.local.broker.stats import EmulatorStats
from runtime.local.http_thread import BackgroundHttpServer, ReplyHandler
from runtime.protocol.contract import METRICS_PATH, PUBSUB_METRICS

STATS_PATH = "/stats"


def stats_json(stats: EmulatorStats) -> dict:
    """The JSON document served at /stats."""
    return {
        "subscriptions": {s.name: dataclasses.asdict(s) for s in stats.subscriptions},
        "published": stats.published,
    }


class PubSubCollector:
    """A prometheus-client collector reading the emulator's stats at every scrape."""

    def __init__(self, stats: Callable[[], EmulatorStats], clock: Callable[[], float] = time.time) -> None:
        self._stats = stats
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        """One sample per subscription (short id) of each series."""
        names = PUBSUB_METRICS
        resource_key, resource = names.resource_label
        labels = [resource_key, names.subscription_label]
        undelivered = GaugeMetricFamily(names.undelivered, "Messages not yet delivered (ready or in backoff).",
                                        labels=labels)
        age = GaugeMetricFamily(names.oldest_unacked_age, "Age in seconds of the oldest unacknowledged message.",
                                labels=labels)
        # A gauge: prometheus-client would rename a counter to ``…_count_total``, and the name must stay the
        # cloud's.
        dead = GaugeMetricFamily(names.dead_lettered, "Messages forwarded to the dead-letter topic so far.",
                                 labels=labels)
        now = self._clock()
        for sub in self._stats().subscriptions:
            sub_id = [resource, sub.name.rsplit("/", 1)[-1]]
            undelivered.add_metric(sub_id, sub.undelivered)
            oldest = sub.oldest_unacked_wall
            age.add_metric(sub_id, 0.0 if oldest is None else max(now - oldest, 0.0))
            dead.add_metric(sub_id, sub.dead_lettered)
        yield from (undelivered, age, dead)


class AdminServer(BackgroundHttpServer):
    """The admin endpoints (``/stats``, ``/metrics``, ``/healthz``) in a background thread."""

    def __init__(self, host: str, port: int, stats: Callable[[], EmulatorStats]) -> None:
        super().__init__(host, port, _handler_for(stats), "pubsub-emulator-admin")


def _handler_for(stats: Callable[[], EmulatorStats]) -> type[ReplyHandler]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PubSubCollector(stats))

    class _Handler(ReplyHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == METRICS_PATH:
                self.reply(HTTPStatus.OK, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif path == STATS_PATH:
                self.reply_json(HTTPStatus.OK, stats_json(stats()))
            else:
                self.reply_json(HTTPStatus.NOT_FOUND,
                                {"error": f"unknown path {self.path}; try {STATS_PATH} or {METRICS_PATH}"})

    return _Handler
