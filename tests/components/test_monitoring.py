"""The Monitoring component under the plan's realistic mocks: managed Prometheus only (no in-cluster stack),
DCGM on GPU nodes within the policy pack's rules, a locked-down namespace, cluster-wide rules and monitorings."""

from __future__ import annotations

import pytest

from components.monitoring import TYPE, Monitoring, MonitoringArgs
from components.policy.rules import check_container_limits, check_container_non_root
from components.rendered import Resource
from components.review.plan import Recording
from runtime.manifests import alerts, dcgm, network
from runtime.protocol import contract
from tests.components.infra import children_of, of_type, run

RELEASE = "kubernetes:helm.sh/v3:Release"
RULE = "kubernetes:monitoring.googleapis.com/v1:ClusterRules"
MONITOR = "kubernetes:monitoring.googleapis.com/v1:ClusterPodMonitoring"


@pytest.fixture(scope="module")
def recording() -> Recording:
    args = MonitoringArgs(runbook_base_url="https://github.example/gpu-runtime/blob/main/docs/runbooks")
    return run(lambda: Monitoring("monitoring", args))


def test_every_resource_is_a_child_of_the_component(recording: Recording) -> None:
    (component,) = [r for r in recording.resources if r.type == TYPE]
    custom = [r for r in recording.resources if r.custom]
    assert custom and children_of(recording, component.name) == custom


def test_one_stack_managed_prometheus_and_nothing_to_run_for_it(recording: Recording) -> None:
    assert of_type(recording, RELEASE) == []  # no kube-prometheus-stack beside GKE's managed Prometheus
    workloads = [r for r in recording.resources if r.type.startswith("kubernetes:apps/v1:")]
    assert [(w.type, w.props["metadata"]["name"]) for w in workloads] == [("kubernetes:apps/v1:DaemonSet", dcgm.NAME)]


def test_nothing_reaches_the_exporter_but_the_collectors(recording: Recording) -> None:
    policies = {p.props["metadata"]["name"]: p.props["spec"]
                for p in of_type(recording, "kubernetes:networking.k8s.io/v1:NetworkPolicy")}
    assert policies["default-deny-ingress"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    [rule] = policies["allow-gpu-metrics-scrape"]["ingress"]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {network.NAMESPACE_NAME_LABEL: "gmp-system"}}}]
    assert rule["ports"] == [{"protocol": "TCP", "port": contract.DCGM_EXPORTER_PORT}]


def test_prometheus_rule_carries_every_alert_with_runbook_links(recording: Recording) -> None:
    (rule,) = of_type(recording, RULE)
    assert "namespace" not in rule.props["metadata"]  # cluster-wide: the rules join gpu-runtime and monitoring
    rendered = [r for group in rule.props["spec"]["groups"] for r in group["rules"]]
    assert [r["alert"] for r in rendered] == [r.alert for r in alerts.ALL_RULES]
    assert all(
        r["annotations"]["runbook_url"].startswith("https://github.example/gpu-runtime/blob/main/docs/runbooks/")
        for r in rendered
    )


def test_dcgm_daemonset_is_excepted_only_from_non_root(recording: Recording) -> None:
    (daemonset,) = of_type(recording, "kubernetes:apps/v1:DaemonSet")
    assert daemonset.props["metadata"]["name"] == dcgm.NAME
    subject = Resource(daemonset.type, daemonset.name, daemonset.props)
    assert check_container_non_root(subject) == []
    assert check_container_limits(subject) == []
    annotations = daemonset.props["spec"]["template"]["metadata"]["annotations"]
    without_exception = {
        **daemonset.props,
        "spec": {
            **daemonset.props["spec"],
            "template": {**daemonset.props["spec"]["template"], "metadata": {"labels": {}}},
        },
    }
    assert annotations[contract.POLICY_EXCEPTION_ANNOTATION].startswith("containers-non-root:")
    assert check_container_non_root(Resource(daemonset.type, daemonset.name, without_exception)) != []


def test_monitoring_namespace_admits_the_privileged_exporter(recording: Recording) -> None:
    (namespace,) = of_type(recording, "kubernetes:core/v1:Namespace")
    assert namespace.props["metadata"]["name"] == contract.MONITORING_NAMESPACE
    assert namespace.props["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_monitors_and_dashboard(recording: Recording) -> None:
    monitors = {m.props["metadata"]["name"] for m in of_type(recording, MONITOR)}
    dask_scheduler = f"{contract.DASK_CLUSTER_NAME}-scheduler"
    assert monitors == {contract.SCHEDULER_DEPLOYMENT, contract.DCGM_EXPORTER_JOB, dask_scheduler}
    configmaps = of_type(recording, "kubernetes:core/v1:ConfigMap")
    assert any(c.props["metadata"]["labels"].get("grafana_dashboard") == "1" for c in configmaps)
