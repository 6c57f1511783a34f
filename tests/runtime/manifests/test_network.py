"""NetworkPolicies, judged by what traffic they let through (a small evaluator of the ingress rules the
builders use: namespace and pod label selectors, TCP ports) rather than by their shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from runtime.manifests import dask_operator, dcgm, network
from runtime.protocol import contract

POLICIES = (network.build_runtime_policies() + network.build_compute_policies() + network.build_operator_policies()
            + network.build_monitoring_policies(dcgm.POD_LABELS, contract.DCGM_EXPORTER_PORT))


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: dict[str, str] = field(default_factory=dict)


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return selector.get("matchLabels", {}).items() <= labels.items()


def _peer_admits(peer: dict[str, Any], source: Pod, policy_namespace: str) -> bool:
    namespace_labels = {network.NAMESPACE_NAME_LABEL: source.namespace}
    if "namespaceSelector" in peer:
        if not _matches(peer["namespaceSelector"], namespace_labels):
            return False
    elif source.namespace != policy_namespace:
        return False
    return "podSelector" not in peer or _matches(peer["podSelector"], source.labels)


def allowed(source: Pod, target: Pod, port: int) -> bool:
    """Kubernetes semantics: isolated once any policy selects the pod; then allowed if any rule admits it."""
    in_namespace = [p for p in POLICIES if p["metadata"]["namespace"] == target.namespace]
    selecting = [p for p in in_namespace if _matches(p["spec"]["podSelector"], target.labels)]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress", []):
            ports = [entry["port"] for entry in rule.get("ports", [])]
            if ports and port not in ports:
                continue
            if any(_peer_admits(peer, source, target.namespace) for peer in rule["from"]):
                return True
    return False


CLUSTER = {dask_operator.CLUSTER_LABEL: contract.DASK_CLUSTER_NAME}
GPU_SCHEDULER = Pod(contract.RUNTIME_NAMESPACE, dict(contract.SCHEDULER_LABELS))
OTHER_RUNTIME_POD = Pod(contract.RUNTIME_NAMESPACE, {"app": "debug"})
COLLECTOR = Pod(network.GMP_NAMESPACE, {"app.kubernetes.io/name": "collector"})
# What used to scrape from `monitoring` no longer may: the managed collectors are the only scrapers.
MONITORING_POD = Pod(contract.MONITORING_NAMESPACE, {"app": "anything"})
DCGM_EXPORTER = Pod(contract.MONITORING_NAMESPACE, dict(dcgm.POD_LABELS))
STRANGER = Pod("default", {"app": "web"})
DASK_SCHEDULER = Pod(contract.COMPUTE_NAMESPACE, {**CLUSTER, dask_operator.COMPONENT_LABEL: "scheduler"})
DASK_WORKER = Pod(contract.COMPUTE_NAMESPACE, {**CLUSTER, dask_operator.COMPONENT_LABEL: "worker"})
DASK_OPERATOR = Pod(contract.DASK_OPERATOR_NAMESPACE, dict(network.DASK_OPERATOR_POD_LABELS))
EPHEMERAL_PORT = 40123


@pytest.mark.parametrize(
    ("source", "target", "port", "expected"),
    [
        # The control API and its metrics: its own namespace and the managed collectors only.
        (OTHER_RUNTIME_POD, GPU_SCHEDULER, contract.SCHEDULER_PORT, True),
        (COLLECTOR, GPU_SCHEDULER, contract.SCHEDULER_PORT, True),
        (STRANGER, GPU_SCHEDULER, contract.SCHEDULER_PORT, False),
        (DASK_WORKER, GPU_SCHEDULER, contract.SCHEDULER_PORT, False),
        (COLLECTOR, GPU_SCHEDULER, 9090, False),
        (MONITORING_POD, GPU_SCHEDULER, contract.SCHEDULER_PORT, False),
        # The probes' port: no pod at all, its own namespace's included (only the kubelet, from the node).
        (OTHER_RUNTIME_POD, GPU_SCHEDULER, contract.SCHEDULER_PROBE_PORT, False),
        (COLLECTOR, GPU_SCHEDULER, contract.SCHEDULER_PROBE_PORT, False),
        (STRANGER, GPU_SCHEDULER, contract.SCHEDULER_PROBE_PORT, False),
        # The Dask scheduler's comm port: the gpu-scheduler and the compute namespace.
        (GPU_SCHEDULER, DASK_SCHEDULER, contract.DASK_SCHEDULER_PORT, True),
        (DASK_WORKER, DASK_SCHEDULER, contract.DASK_SCHEDULER_PORT, True),
        (OTHER_RUNTIME_POD, DASK_SCHEDULER, contract.DASK_SCHEDULER_PORT, False),
        (STRANGER, DASK_SCHEDULER, contract.DASK_SCHEDULER_PORT, False),
        # Its dashboard / HTTP API: the collectors and the operator.
        (COLLECTOR, DASK_SCHEDULER, contract.DASK_DASHBOARD_PORT, True),
        (DASK_OPERATOR, DASK_SCHEDULER, contract.DASK_DASHBOARD_PORT, True),
        (GPU_SCHEDULER, DASK_SCHEDULER, contract.DASK_DASHBOARD_PORT, False),
        (DASK_WORKER, DASK_SCHEDULER, contract.DASK_DASHBOARD_PORT, False),
        (MONITORING_POD, DASK_SCHEDULER, contract.DASK_DASHBOARD_PORT, False),
        # The privileged GPU exporter: its metrics port, to the collectors, and nothing else.
        (COLLECTOR, DCGM_EXPORTER, contract.DCGM_EXPORTER_PORT, True),
        (COLLECTOR, DCGM_EXPORTER, 5555, False),
        (GPU_SCHEDULER, DCGM_EXPORTER, contract.DCGM_EXPORTER_PORT, False),
        (STRANGER, DCGM_EXPORTER, contract.DCGM_EXPORTER_PORT, False),
        (STRANGER, MONITORING_POD, 8080, False),
        # Workers: peers and the scheduler on any port, the gpu-scheduler for direct gathers, metrics scrapes.
        (DASK_WORKER, DASK_WORKER, EPHEMERAL_PORT, True),
        (DASK_SCHEDULER, DASK_WORKER, EPHEMERAL_PORT, True),
        (GPU_SCHEDULER, DASK_WORKER, EPHEMERAL_PORT, True),
        (COLLECTOR, DASK_WORKER, network.DASK_WORKER_DASHBOARD_PORT, True),
        (COLLECTOR, DASK_WORKER, EPHEMERAL_PORT, False),
        (DASK_OPERATOR, DASK_WORKER, EPHEMERAL_PORT, False),
        (STRANGER, DASK_WORKER, EPHEMERAL_PORT, False),
        # Default deny covers pods no other policy names.
        (STRANGER, DASK_OPERATOR, 8080, False),
        (STRANGER, OTHER_RUNTIME_POD, 8080, False),
    ],
)
def test_ingress(source: Pod, target: Pod, port: int, expected: bool) -> None:
    assert allowed(source, target, port) is expected


def test_policies_restrict_ingress_only() -> None:
    assert {tuple(policy["spec"]["policyTypes"]) for policy in POLICIES} == {("Ingress",)}
