"""The Grafana dashboard: GPU health from DCGM beside the platform's own ``gpu_runtime_*`` series.

It ships as a ConfigMap labelled ``grafana_dashboard: "1"``, which Grafana's dashboard sidecar (as in
kube-prometheus-stack) loads without any manual import.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from runtime.manifests.common import Manifest, metadata
from runtime.protocol import contract

M = contract.METRICS
DASHBOARD_UID: Final = "gpu-runtime"
CONFIGMAP_NAME: Final = "gpu-runtime-dashboard"
SIDECAR_LABEL: Final = ("grafana_dashboard", "1")
# Grafana lays panels on a 24-column grid; two panels per row, eight rows of grid units high.
GRID_COLUMNS: Final = 24
PANEL_WIDTH: Final = 12
PANEL_HEIGHT: Final = 8
DATASOURCE: Final = {"type": "prometheus", "uid": "${datasource}"}


@dataclass(frozen=True)
class Panel:
    """A time-series panel: a title, its queries (legend per query) and a unit."""

    title: str
    queries: tuple[tuple[str, str], ...]
    unit: str = "short"


PANELS: Final = (
    Panel("GPU utilization", (("DCGM_FI_DEV_GPU_UTIL", "{{Hostname}} gpu{{gpu}}"),), "percent"),
    Panel(
        "GPU memory used",
        (("DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)", "{{Hostname}} gpu{{gpu}}"),),
        "percentunit",
    ),
    Panel("GPU temperature", (("DCGM_FI_DEV_GPU_TEMP", "{{Hostname}} gpu{{gpu}}"),), "celsius"),
    Panel("GPU ECC errors (double-bit, 1h)", (("increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[1h])", "{{Hostname}}"),)),
    Panel("Jobs finished by status", ((f"sum by (status) (rate({M.jobs_total}[5m]))", "{{status}}"),), "ops"),
    Panel(
        "Job duration p95 by type",
        (
            (
                f"histogram_quantile(0.95, sum by (le, type) (rate({M.job_duration_seconds}_bucket[5m])))",
                "{{type}}",
            ),
        ),
        "s",
    ),
    # Per request queue (docs/scheduler.md, Queues): each desk's wait against the SLO, its backlog, and the share
    # of the slots its jobs got.
    Panel(
        "Queue wait p95 by queue",
        ((f"histogram_quantile(0.95, sum by (le, queue) (rate({M.queue_wait_seconds}_bucket[5m])))", "{{queue}}"),),
        "s",
    ),
    Panel("Queue depth by queue", ((f"max by (queue) ({M.queue_depth})", "{{queue}}"),)),
    Panel(
        "Share of job starts by queue",
        ((f"sum by (queue) (rate({M.queue_started_total}[5m])) / ignoring (queue) group_left "
          f"sum(rate({M.queue_started_total}[5m]))", "{{queue}}"),),
        "percentunit",
    ),
    Panel("Slots held by queue", ((f"sum by (queue) ({M.queue_slots})", "{{queue}}"),)),
    Panel(
        "Backlog, dead letters, in flight",
        (
            (f"max({M.backlog_messages})", "backlog"),
            (f"max({M.dlq_messages})", "dead letters"),
            (f"sum({M.jobs_in_flight})", "in flight"),
        ),
    ),
    Panel("Workers per pool", ((f"max by (pool) ({M.pool_workers})", "{{pool}}"),)),
    Panel(
        "Retries and evictions",
        (
            (f"sum(rate({M.job_retries_total}[5m]))", "retries/s"),
            (f"sum by (pool) (increase({M.pool_evictions_total}[15m]))", "evictions {{pool}}"),
        ),
    ),
    Panel(
        "Leader and maintenance",
        (
            (f"max({M.leader})", "leader held"),
            (f"max({M.maintenance_mode})", "draining"),
            (f"sum(increase({M.leader_election_failures_total}[10m]))", "election failures"),
        ),
    ),
)


def _panel_json(panel: Panel, index: int) -> Manifest:
    return {
        "id": index + 1,
        "type": "timeseries",
        "title": panel.title,
        "datasource": DATASOURCE,
        "gridPos": {
            "x": (index * PANEL_WIDTH) % GRID_COLUMNS,
            "y": (index * PANEL_WIDTH) // GRID_COLUMNS * PANEL_HEIGHT,
            "w": PANEL_WIDTH,
            "h": PANEL_HEIGHT,
        },
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + n), "expr": expr, "legendFormat": legend, "datasource": DATASOURCE}
            for n, (expr, legend) in enumerate(panel.queries)
        ],
    }


def build_dashboard() -> Manifest:
    """The dashboard model (Grafana JSON), with a Prometheus data-source picker."""
    return {
        "uid": DASHBOARD_UID,
        "title": "GPU Runtime",
        "tags": ["gpu-runtime", "dcgm", "dask"],
        "timezone": "utc",
        "schemaVersion": 39,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"}]
        },
        "panels": [_panel_json(panel, index) for index, panel in enumerate(PANELS)],
    }


def build_dashboard_configmap() -> Manifest:
    """The ConfigMap the Grafana sidecar picks up (label ``grafana_dashboard: "1"``)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(CONFIGMAP_NAME, contract.MONITORING_NAMESPACE, {SIDECAR_LABEL[0]: SIDECAR_LABEL[1]}),
        "data": {f"{DASHBOARD_UID}.json": json.dumps(build_dashboard(), indent=2)},
    }
