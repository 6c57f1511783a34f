"""Helm charts the platform installs, their pinned versions, and the values this project sets on them."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import version
from typing import Final

from components.manifests.common import RUN_AS_USER, Manifest, Resources
from components.manifests.dashboard import SIDECAR_LABEL


@dataclass(frozen=True)
class Chart:
    """A chart in a repository, at a version."""

    name: str
    repository: str
    version: str


def dask_operator_chart() -> Chart:
    """The dask-kubernetes operator at the version of the locked ``dask-kubernetes`` package.

    The CRD schemas the tests validate against ship inside that package, so the operator installed and
    the schemas checked cannot drift apart.
    """
    return Chart("dask-kubernetes-operator", "https://helm.dask.org", version("dask-kubernetes"))


PROMETHEUS_STACK_CHART: Final = Chart(
    "kube-prometheus-stack", "https://prometheus-community.github.io/helm-charts", "79.4.1"
)
OPERATOR_RESOURCES: Final = Resources(
    cpu_request="100m", memory_request="256Mi", cpu_limit="500m", memory_limit="512Mi"
)
PROMETHEUS_RESOURCES: Final = Resources(cpu_request="500m", memory_request="2Gi", cpu_limit="2", memory_limit="4Gi")
PROMETHEUS_RETENTION: Final = "15d"
# 15 days of a few thousand series at a 30 s interval fit comfortably; the disk is a balanced PD.
PROMETHEUS_DISK: Final = "50Gi"
PROMETHEUS_STORAGE_CLASS: Final = "standard-rwo"


def dask_operator_values() -> Manifest:
    """Operator values: resource limits and a pod context that passes the ``restricted`` Pod Security level.

    The chart already drops capabilities and runs as non-root; it leaves the pod without a seccomp
    profile, which ``restricted`` (enforced on ``compute``) refuses.
    """
    return {
        "resources": OPERATOR_RESOURCES.to_manifest(),
        "podSecurityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }


def prometheus_stack_values(grafana_admin_password: str = "") -> Manifest:
    """kube-prometheus-stack values for GKE.

    - Prometheus selects every PrometheusRule/ServiceMonitor/PodMonitor, not only the chart's own
      (the ``*NilUsesHelmValues`` switches), and keeps its data on a persistent disk;
    - GKE manages the control plane and (with Dataplane V2) runs no kube-proxy, so those scrapers are off;
    - Grafana loads dashboards from ConfigMaps labelled ``grafana_dashboard: "1"``; an empty admin
      password makes the Grafana chart generate a random one into its Secret instead of the well-known
      default.
    """
    return {
        "prometheus": {
            "prometheusSpec": {
                "ruleSelectorNilUsesHelmValues": False,
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
                "retention": PROMETHEUS_RETENTION,
                "resources": PROMETHEUS_RESOURCES.to_manifest(),
                "storageSpec": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "storageClassName": PROMETHEUS_STORAGE_CLASS,
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": PROMETHEUS_DISK}},
                        }
                    }
                },
            }
        },
        "grafana": {
            "adminPassword": grafana_admin_password,
            "sidecar": {
                "dashboards": {"enabled": True, "label": SIDECAR_LABEL[0], "labelValue": SIDECAR_LABEL[1]}
            },
        },
        "kubeControllerManager": {"enabled": False},
        "kubeScheduler": {"enabled": False},
        "kubeEtcd": {"enabled": False},
        "kubeProxy": {"enabled": False},
    }
