"""``Monitoring``: Prometheus Operator stack, DCGM GPU metrics, scrape targets, alert rules and the dashboard.

By default the component installs kube-prometheus-stack (Prometheus Operator, Prometheus, Alertmanager,
Grafana, kube-state-metrics) in ``monitoring``: the platform then brings everything its alerts need,
and a fresh cluster is observable from the first deploy. Where a cluster already runs a Prometheus
Operator, set ``install_prometheus_stack=False`` and pass the labels its rule/monitor selectors expect in
``selector_labels``; the custom resources are then created against the existing CRDs. Alertmanager
routing (who gets paged) belongs to each organisation and is left to its own configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components import contract
from components.k8s_objects import apply_manifest
from components.manifests import alerts, common, dashboard, dcgm, monitors
from components.manifests.helm_values import PROMETHEUS_STACK_CHART, Chart, prometheus_stack_values

TYPE = "gpu-runtime:monitoring:Monitoring"


@dataclass
class MonitoringArgs:
    """Inputs of the monitoring stack."""

    install_prometheus_stack: bool = True
    """Install kube-prometheus-stack; False assumes a Prometheus Operator is already there."""
    prometheus_stack_chart: Chart = PROMETHEUS_STACK_CHART
    """Chart and version of kube-prometheus-stack."""
    dcgm_exporter_image: str = dcgm.DEFAULT_IMAGE
    """NVIDIA DCGM exporter image."""
    runbook_base_url: str = alerts.DEFAULT_RUNBOOK_BASE
    """Prefix of every alert's ``runbook_url`` (e.g. the repository's docs/runbooks URL)."""
    grafana_admin_password: pulumi.Input[str] | None = None
    """Grafana admin password (a Pulumi secret); unset, the Grafana chart generates a random one."""
    selector_labels: Mapping[str, str] = field(default_factory=dict)
    """Extra labels on the PrometheusRule and ServiceMonitors, for an existing Prometheus' selectors."""
    dask_cluster_name: str = contract.DASK_CLUSTER_NAME
    """DaskCluster whose scheduler is scraped."""


class Monitoring(pulumi.ComponentResource):
    """Namespace ``monitoring`` and everything that watches the platform."""

    namespace: pulumi.Output[str]
    """Namespace ``monitoring``."""
    prometheus_rule: pulumi.Output[str]
    """Name of the PrometheusRule holding every alert."""
    alerts: pulumi.Output[list[str]]
    """Names of the alerts declared."""

    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE, name, None, opts)
        ns = apply_manifest(
            name,
            common.namespace(contract.MONITORING_NAMESPACE, common.PSA_PRIVILEGED),
            pulumi.ResourceOptions(parent=self),
        )
        in_ns = pulumi.ResourceOptions(parent=self, depends_on=[ns])
        crd_owners: list[pulumi.Resource] = [ns]
        if args.install_prometheus_stack:
            chart = args.prometheus_stack_chart
            password = args.grafana_admin_password
            values = prometheus_stack_values(
                "" if password is None else pulumi.Output.secret(password)  # an Output: placed, never inspected
            )
            crd_owners.append(
                k8s.helm.v3.Release(
                    f"{name}-prometheus-stack",
                    name=chart.name,
                    chart=chart.name,
                    version=chart.version,
                    repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository),
                    namespace=contract.MONITORING_NAMESPACE,
                    values=values,
                    atomic=True,
                    opts=in_ns,
                )
            )
        apply_manifest(name, dcgm.build_counters_configmap(), in_ns)
        apply_manifest(name, dcgm.build_daemonset(args.dcgm_exporter_image), in_ns)
        apply_manifest(name, dcgm.build_service(), in_ns)
        apply_manifest(name, dashboard.build_dashboard_configmap(), in_ns)

        # Prometheus Operator kinds exist only once the stack (or an existing operator) installed their CRDs.
        after_crds = pulumi.ResourceOptions(parent=self, depends_on=crd_owners)
        for monitor in monitors.build_service_monitors(args.dask_cluster_name):
            monitor["metadata"]["labels"].update(args.selector_labels)
            apply_manifest(name, monitor, after_crds)
        rule = apply_manifest(
            name, alerts.build_prometheus_rule(args.runbook_base_url, dict(args.selector_labels)), after_crds
        )

        self.namespace = ns.metadata.apply(lambda meta: meta["name"])
        self.prometheus_rule = rule.id.apply(lambda _: alerts.PROMETHEUS_RULE_NAME)
        self.alerts = pulumi.Output.from_input([rule_.alert for rule_ in alerts.ALL_RULES])
        self.register_outputs(
            {"namespace": self.namespace, "prometheus_rule": self.prometheus_rule, "alerts": self.alerts}
        )
