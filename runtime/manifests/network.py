"""NetworkPolicies that keep the control API and the Dask cluster private.

Both namespaces deny all ingress by default; each policy below opens exactly one path. Egress stays open:
the pods need Google APIs, the metadata server (Workload Identity) and each other, and pinning Google's
API ranges in policy would break on their next change.
"""

from __future__ import annotations

from typing import Final

from runtime.manifests import dask_operator
from runtime.manifests.common import Manifest, metadata
from runtime.protocol import contract

# Label the API server sets on every namespace (Kubernetes >= 1.21), so no namespace needs labelling by us.
NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"
# The operator itself (selector labels of the dask-kubernetes-operator chart): it calls the scheduler's
# HTTP API (adaptive target, worker retirement) on the dashboard port.
DASK_OPERATOR_POD_LABELS: Final = {"app.kubernetes.io/name": "dask-kubernetes-operator"}
# Where GKE's managed Prometheus collectors run (Managed Service for Prometheus): the only scrapers.
GMP_NAMESPACE: Final = "gmp-system"
# Dask workers listen on ephemeral ports (worker, nanny), so peer traffic cannot be narrowed to a port;
# the worker dashboard (metrics) is fixed by dask-kubernetes.
DASK_WORKER_DASHBOARD_PORT: Final = 8788


def _namespace(name: str) -> Manifest:
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: name}}}


def _pods_in(namespace: str, pod_labels: dict[str, str]) -> Manifest:
    return {**_namespace(namespace), "podSelector": {"matchLabels": dict(pod_labels)}}


def _tcp(port: int) -> Manifest:
    return {"protocol": "TCP", "port": port}


def _policy(name: str, namespace: str, pod_labels: dict[str, str], ingress: list[Manifest]) -> Manifest:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(name, namespace),
        "spec": {"podSelector": {"matchLabels": pod_labels}, "policyTypes": ["Ingress"], "ingress": ingress},
    }


def build_default_deny(namespace: str) -> Manifest:
    """Deny every ingress to every pod of ``namespace`` unless another policy allows it."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata("default-deny-ingress", namespace),
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    }


def build_runtime_policies() -> list[Manifest]:
    """Namespace ``gpu-runtime``: the scheduler API from its own namespace, its metrics from the collectors.

    The probes' port (``contract.SCHEDULER_PROBE_PORT``) is opened to no one: the kubelet probes from the
    pod's node, and "traffic to and from the node where a Pod is running is always allowed, regardless of
    the IP address of the Pod or the node" (https://kubernetes.io/docs/concepts/services-networking/network-policies/).
    So no pod, in this namespace or any other, can flood the probes as it can the API.
    """
    allow_api = _policy(
        f"allow-{contract.SCHEDULER_DEPLOYMENT}-api",
        contract.RUNTIME_NAMESPACE,
        dict(contract.SCHEDULER_LABELS),
        [
            {
                "from": [_namespace(contract.RUNTIME_NAMESPACE), _namespace(GMP_NAMESPACE)],
                "ports": [_tcp(contract.SCHEDULER_PORT)],
            }
        ],
    )
    return [build_default_deny(contract.RUNTIME_NAMESPACE), allow_api]


def build_compute_policies(cluster_name: str = contract.DASK_CLUSTER_NAME) -> list[Manifest]:
    """Namespace ``compute``: the Dask scheduler and workers talk to each other and to the gpu-scheduler only.

    - scheduler comm port: from the gpu-scheduler (its Dask client) and from pods of ``compute``;
    - scheduler dashboard (HTTP API, metrics): from the metric collectors and from the Dask operator;
    - workers, any port: from pods of the same Dask cluster, and from the gpu-scheduler (direct gathers);
      their dashboard (metrics) from the metric collectors.
    """
    cluster = {dask_operator.CLUSTER_LABEL: cluster_name}
    scheduler_pods = {**cluster, dask_operator.COMPONENT_LABEL: "scheduler"}
    worker_pods = {**cluster, dask_operator.COMPONENT_LABEL: "worker"}
    gpu_scheduler = _pods_in(contract.RUNTIME_NAMESPACE, dict(contract.SCHEDULER_LABELS))
    namespace = contract.COMPUTE_NAMESPACE
    comm = _policy(
        "allow-dask-scheduler-comm",
        namespace,
        scheduler_pods,
        [{"from": [gpu_scheduler, _namespace(namespace)], "ports": [_tcp(contract.DASK_SCHEDULER_PORT)]}],
    )
    dashboard = _policy(
        "allow-dask-scheduler-dashboard",
        namespace,
        scheduler_pods,
        [
            {
                "from": [
                    _namespace(GMP_NAMESPACE),
                    _pods_in(contract.DASK_OPERATOR_NAMESPACE, DASK_OPERATOR_POD_LABELS),
                ],
                "ports": [_tcp(contract.DASK_DASHBOARD_PORT)],
            }
        ],
    )
    workers = _policy(
        "allow-dask-workers",
        namespace,
        worker_pods,
        [
            {"from": [_pods_in(namespace, cluster), gpu_scheduler]},
            {"from": [_namespace(GMP_NAMESPACE)], "ports": [_tcp(DASK_WORKER_DASHBOARD_PORT)]},
        ],
    )
    return [build_default_deny(namespace), comm, dashboard, workers]


def build_operator_policies() -> list[Manifest]:
    """Namespace of the Dask operator: nothing gets in (it calls the API server and the schedulers; none calls it)."""
    return [build_default_deny(contract.DASK_OPERATOR_NAMESPACE)]


def build_monitoring_policies(exporter_labels: dict[str, str], exporter_port: int) -> list[Manifest]:
    """Namespace ``monitoring``: nothing gets in but the collectors, to the GPU exporter's metrics port.

    The exporter runs privileged on every GPU node; nothing but the scrape should be able to reach it.
    """
    metrics = _policy(
        "allow-gpu-metrics-scrape",
        contract.MONITORING_NAMESPACE,
        dict(exporter_labels),
        [{"from": [_namespace(GMP_NAMESPACE)], "ports": [_tcp(exporter_port)]}],
    )
    return [build_default_deny(contract.MONITORING_NAMESPACE), metrics]
