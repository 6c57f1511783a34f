"""ClusterPodMonitorings (Google Cloud Managed Service for Prometheus) for the three scrape targets.

GKE's managed collectors (namespace ``gmp-system``) scrape the pods these select, in whatever namespace
they run; the ``job`` label of every series is the monitoring's name, which is what the alert rules
select on (``up{job="dcgm-exporter"}``). Ports are the container ports, by number, from the contract.
"""

from __future__ import annotations

from typing import Final

from runtime.manifests import dask_operator, dcgm
from runtime.manifests.common import Manifest, metadata
from runtime.protocol import contract

GMP_API_VERSION: Final = "monitoring.googleapis.com/v1"
SCRAPE_INTERVAL: Final = "30s"


def build_pod_monitoring(name: str, pod_labels: dict[str, str], port: int) -> Manifest:
    """A ClusterPodMonitoring scraping ``/metrics`` on ``port`` of every pod carrying ``pod_labels``."""
    return {
        "apiVersion": GMP_API_VERSION,
        "kind": "ClusterPodMonitoring",
        "metadata": metadata(name),
        "spec": {
            "selector": {"matchLabels": dict(pod_labels)},
            "endpoints": [{"port": port, "path": contract.METRICS_PATH, "interval": SCRAPE_INTERVAL}],
        },
    }


def build_pod_monitorings(dask_cluster: str = contract.DASK_CLUSTER_NAME) -> list[Manifest]:
    """Monitorings of the gpu-scheduler (``gpu_runtime_*``), the Dask scheduler and the DCGM exporter."""
    return [
        build_pod_monitoring(contract.SCHEDULER_DEPLOYMENT, dict(contract.SCHEDULER_LABELS), contract.SCHEDULER_PORT),
        build_pod_monitoring(
            f"{dask_cluster}-scheduler",
            {dask_operator.CLUSTER_LABEL: dask_cluster, dask_operator.COMPONENT_LABEL: "scheduler"},
            contract.DASK_DASHBOARD_PORT,
        ),
        build_pod_monitoring(dcgm.NAME, dict(dcgm.POD_LABELS), contract.DCGM_EXPORTER_PORT),
    ]
