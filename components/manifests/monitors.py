"""ServiceMonitors (Prometheus Operator) for the three scrape targets: gpu-scheduler, Dask scheduler, DCGM.

They live in ``monitoring`` and reach into the target's namespace with ``namespaceSelector``; Prometheus'
``job`` label is the Service name, which is what the alert rules select on.
"""

from __future__ import annotations

from typing import Final

from components import contract
from components.manifests import dcgm
from components.manifests.common import Manifest, metadata
from components.manifests.network import DASK_CLUSTER_LABEL, DASK_COMPONENT_LABEL
from components.manifests.scheduler import PORT_NAME as SCHEDULER_PORT_NAME

SCRAPE_INTERVAL: Final = "30s"
# Port name the dask-kubernetes operator gives the scheduler's dashboard (where /metrics is served).
DASK_DASHBOARD_PORT_NAME: Final = "http-dashboard"


def build_service_monitor(name: str, namespace: str, selector: dict[str, str], port: str) -> Manifest:
    """A ServiceMonitor scraping ``/metrics`` on ``port`` of the Services matching ``selector`` in ``namespace``."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": metadata(name, contract.MONITORING_NAMESPACE),
        "spec": {
            "namespaceSelector": {"matchNames": [namespace]},
            "selector": {"matchLabels": dict(selector)},
            "endpoints": [{"port": port, "path": contract.METRICS_PATH, "interval": SCRAPE_INTERVAL}],
        },
    }


def build_service_monitors(dask_cluster: str = contract.DASK_CLUSTER_NAME) -> list[Manifest]:
    """Monitors for the gpu-scheduler (``gpu_runtime_*``), the Dask scheduler and the DCGM exporter."""
    return [
        build_service_monitor(
            contract.SCHEDULER_DEPLOYMENT,
            contract.RUNTIME_NAMESPACE,
            dict(contract.SCHEDULER_LABELS),
            SCHEDULER_PORT_NAME,
        ),
        build_service_monitor(
            f"{dask_cluster}-scheduler",
            contract.COMPUTE_NAMESPACE,
            {DASK_CLUSTER_LABEL: dask_cluster, DASK_COMPONENT_LABEL: "scheduler"},
            DASK_DASHBOARD_PORT_NAME,
        ),
        build_service_monitor(dcgm.NAME, contract.MONITORING_NAMESPACE, dict(dcgm.POD_LABELS), dcgm.PORT_NAME),
    ]
