"""The Monitoring component under the plan's realistic mocks: the Prometheus stack (or an existing one),
DCGM on GPU nodes within the policy pack's rules, rules and monitors after the CRDs, the dashboard."""

from __future__ import annotations

import pulumi
import pytest

from components import contract
from components.manifests import alerts, dcgm
from components.monitoring import TYPE, Monitoring, MonitoringArgs
from components.plan import Recording
from components.policy.rules import Subject, check_container_limits, check_container_non_root
from tests.components.infra import children_of, named, of_type, run

RELEASE = "kubernetes:helm.sh/v3:Release"
RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
MONITOR = "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"


@pytest.fixture(scope="module")
def recording() -> Recording:
    args = MonitoringArgs(
        runbook_base_url="https://github.example/gpu-runtime/blob/main/docs/runbooks",
        grafana_admin_password=pulumi.Output.secret("grafana-pw"),
    )
    return run(lambda: Monitoring("monitoring", args))


def test_every_resource_is_a_child_of_the_component(recording: Recording) -> None:
    (component,) = [r for r in recording.resources if r.type == TYPE]
    custom = [r for r in recording.resources if r.custom]
    assert custom and children_of(recording, component.name) == custom


def test_prometheus_stack_release_in_monitoring(recording: Recording) -> None:
    release = named(recording, RELEASE, "monitoring-prometheus-stack")
    assert release.props["chart"] == "kube-prometheus-stack"
    assert release.props["namespace"] == contract.MONITORING_NAMESPACE
    assert release.props["values"]["grafana"]["adminPassword"] == "grafana-pw"
    assert "grafana-pw" not in repr(release.shown)


def test_prometheus_rule_carries_every_alert_with_runbook_links(recording: Recording) -> None:
    (rule,) = of_type(recording, RULE)
    rendered = [r for group in rule.props["spec"]["groups"] for r in group["rules"]]
    assert [r["alert"] for r in rendered] == [r.alert for r in alerts.ALL_RULES]
    assert all(
        r["annotations"]["runbook_url"].startswith("https://github.example/gpu-runtime/blob/main/docs/runbooks/")
        for r in rendered
    )


def test_dcgm_daemonset_is_excepted_only_from_non_root(recording: Recording) -> None:
    (daemonset,) = of_type(recording, "kubernetes:apps/v1:DaemonSet")
    assert daemonset.props["metadata"]["name"] == dcgm.NAME
    subject = Subject(daemonset.type, daemonset.name, daemonset.props)
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
    assert check_container_non_root(Subject(daemonset.type, daemonset.name, without_exception)) != []


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


def test_existing_prometheus_operator_gets_its_selector_labels_and_no_release() -> None:
    args = MonitoringArgs(install_prometheus_stack=False, selector_labels={"release": "ops"})
    recording = run(lambda: Monitoring("mon", args))
    assert of_type(recording, RELEASE) == []
    for resource in of_type(recording, RULE) + of_type(recording, MONITOR):
        assert resource.props["metadata"]["labels"]["release"] == "ops"
