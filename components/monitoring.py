"""``Monitoring``: GPU metrics, scrape targets and alert rules on Google Cloud Managed Service for Prometheus.

One monitoring stack: GKE's managed Prometheus (enabled on the cluster by ``components.gke``). Its
collectors scrape what the ClusterPodMonitorings select, the series land in Cloud Monitoring (queried with
PromQL, 24 months retention), and its managed rule evaluator runs the ClusterRules. Nothing here has to be
sized, patched or backed up: no Prometheus, Alertmanager or Grafana runs in the cluster. Alert routing
(who gets paged) belongs to each organisation: the managed Alertmanager's configuration (Secret
``alertmanager`` in ``gmp-public``) or Cloud Monitoring alerting.

GPU series come from this project's own DCGM exporter, not GKE's managed DCGM package: the managed package
exports a fixed metric set without the ECC error counters the GPU node alerts need. The exporter must run
privileged (it reads GPUs it does not claim, through host paths), so ``monitoring`` holds only it and
enforces the ``privileged`` Pod Security level; its NetworkPolicies let nothing in but the collectors.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.k8s_objects import apply_manifest
from runtime.manifests import alerts, common, dashboard, dcgm, monitors, network
from runtime.protocol import contract

TYPE = "gpu-runtime:monitoring:Monitoring"


@dataclass
class MonitoringArgs:
    """Inputs of the monitoring component."""

    dcgm_exporter_image: str = dcgm.DEFAULT_IMAGE
    """NVIDIA DCGM exporter image."""
    runbook_base_url: str = alerts.DEFAULT_RUNBOOK_BASE
    """Prefix of every alert's ``runbook_url`` (e.g. the repository's docs/runbooks URL)."""
    dask_cluster_name: str = contract.DASK_CLUSTER_NAME
    """DaskCluster whose scheduler is scraped."""


class Monitoring(pulumi.ComponentResource):
    """Namespace ``monitoring`` with the DCGM exporter, the cluster's scrape targets and alert rules."""

    namespace: pulumi.Output[str]
    """Namespace ``monitoring``."""
    prometheus_rule: pulumi.Output[str]
    """Name of the ClusterRules object holding every alert."""
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
        for policy in network.build_monitoring_policies(dcgm.POD_LABELS, contract.DCGM_EXPORTER_PORT):
            apply_manifest(name, policy, in_ns)
        apply_manifest(name, dcgm.build_counters_configmap(), in_ns)
        apply_manifest(name, dcgm.build_daemonset(args.dcgm_exporter_image), in_ns)
        apply_manifest(name, dcgm.build_service(), in_ns)
        apply_manifest(name, dashboard.build_dashboard_configmap(), in_ns)

        # Cluster-scoped kinds of GKE's managed Prometheus (its CRDs come with the cluster).
        cluster_wide = pulumi.ResourceOptions(parent=self)
        for monitoring in monitors.build_pod_monitorings(args.dask_cluster_name):
            apply_manifest(name, monitoring, cluster_wide)
        rules = apply_manifest(name, alerts.build_cluster_rules(args.runbook_base_url), cluster_wide)

        self.namespace = ns.metadata.apply(lambda meta: meta["name"])
        self.prometheus_rule = rules.id.apply(lambda _: alerts.PROMETHEUS_RULE_NAME)
        self.alerts = pulumi.Output.from_input([rule_.alert for rule_ in alerts.ALL_RULES])
        self.register_outputs(
            {"namespace": self.namespace, "prometheus_rule": self.prometheus_rule, "alerts": self.alerts}
        )
