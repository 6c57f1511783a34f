"""Monitoring builders: the DCGM exporter on GPU nodes, scrape targets that match their Services, a
dashboard on real series, and the Helm values the components set."""

from __future__ import annotations

import json
import re

from runtime.manifests import alerts, dashboard, dask_operator, dcgm, helm_values, monitors, scheduler
from runtime.protocol import contract


def _dcgm_series_used() -> set[str]:
    queries = [rule.expr for rule in alerts.ALL_RULES]
    queries += [expr for panel in dashboard.PANELS for expr, _ in panel.queries]
    return {name for query in queries for name in re.findall(r"DCGM_FI_[A-Z_]+", query)}


def test_dcgm_exporter_runs_on_gpu_nodes_only_and_says_why_it_is_privileged() -> None:
    daemonset = dcgm.build_daemonset()
    assert daemonset["metadata"]["namespace"] == contract.MONITORING_NAMESPACE
    template = daemonset["spec"]["template"]
    pod = template["spec"]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "cloud.google.com/gke-accelerator", "operator": "Exists"}]
    assert pod["tolerations"] == [
        {"key": contract.GPU_TAINT_KEY, "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    (container,) = pod["containers"]
    assert container["ports"][0]["containerPort"] == contract.DCGM_EXPORTER_PORT
    assert contract.GPU_RESOURCE not in container["resources"]["limits"]
    assert {"cpu", "memory"} <= container["resources"]["limits"].keys()
    assert container["securityContext"]["privileged"] is True
    assert template["metadata"]["annotations"][contract.POLICY_EXCEPTION_ANNOTATION]
    host_paths = {volume["hostPath"]["path"] for volume in pod["volumes"] if "hostPath" in volume}
    assert dcgm.GKE_NVIDIA_HOST_DIR in host_paths


def test_dcgm_collects_every_series_the_alerts_and_dashboard_read() -> None:
    collected = {name for name, _, _ in dcgm.COUNTERS}
    assert _dcgm_series_used() <= collected
    csv = dcgm.build_counters_configmap()["data"]["counters.csv"]
    assert all(f"{name}, " in csv for name in collected)


def test_dcgm_service_is_the_job_the_node_down_alert_selects() -> None:
    service = dcgm.build_service()
    assert service["metadata"]["name"] == contract.DCGM_EXPORTER_JOB
    assert service["spec"]["ports"][0]["port"] == contract.DCGM_EXPORTER_PORT
    node_down = next(rule for rule in alerts.ALL_RULES if rule.alert == "GpuNodeDown")
    assert f'job="{service["metadata"]["name"]}"' in node_down.expr


def test_pod_monitorings_scrape_the_pods_container_ports() -> None:
    by_name = {m["metadata"]["name"]: m["spec"] for m in monitors.build_pod_monitorings()}
    deployment = scheduler.build_deployment(scheduler.SchedulerSpec(project="p", image="i", result_store="gs://b"))
    daemonset = dcgm.build_daemonset()
    pods = {
        contract.SCHEDULER_DEPLOYMENT: deployment["spec"]["template"],
        contract.DCGM_EXPORTER_JOB: daemonset["spec"]["template"],
    }
    for name, template in pods.items():
        spec = by_name[name]
        assert spec["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
        # every port of the pod but the kubelet's probes' own listener, which serves nothing else
        ports = {port["containerPort"] for c in template["spec"]["containers"] for port in c["ports"]}
        assert [endpoint["port"] for endpoint in spec["endpoints"]] == sorted(ports - {contract.SCHEDULER_PROBE_PORT})
        assert spec["endpoints"][0]["path"] == contract.METRICS_PATH
    dask = by_name[f"{contract.DASK_CLUSTER_NAME}-scheduler"]
    assert dask["selector"]["matchLabels"][dask_operator.COMPONENT_LABEL] == "scheduler"
    assert dask["endpoints"][0]["port"] == contract.DASK_DASHBOARD_PORT


def test_dashboard_configmap_is_picked_up_and_queries_real_series() -> None:
    configmap = dashboard.build_dashboard_configmap()
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    model = json.loads(configmap["data"][f"{dashboard.DASHBOARD_UID}.json"])
    exprs = [target["expr"] for panel in model["panels"] for target in panel["targets"]]
    known = set(vars(contract.METRICS).values())
    used = {name for expr in exprs for name in re.findall(rf"\b{contract.METRICS_PREFIX}[a-z_]+", expr)}
    assert {re.sub(r"_bucket$", "", name) for name in used} <= known
    assert any(expr.startswith("DCGM_FI_DEV_GPU_UTIL") for expr in exprs)
    positions = [(panel["gridPos"]["x"], panel["gridPos"]["y"]) for panel in model["panels"]]
    assert len(positions) == len(set(positions))


def test_operator_values_pass_the_restricted_pod_security_level() -> None:
    values = helm_values.dask_operator_values()
    assert values["podSecurityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert values["podSecurityContext"]["runAsNonRoot"] is True
    assert {"cpu", "memory"} <= values["resources"]["limits"].keys()


def test_operator_values_are_keys_the_chart_reads() -> None:
    # Helm ignores unknown values silently; the chart's own values.yaml (shipped in the locked package) lists them.
    from importlib.resources import files

    import yaml

    chart_dir = files("dask_kubernetes") / "operator/deployment/helm/dask-kubernetes-operator"
    defaults = yaml.safe_load((chart_dir / "values.yaml").read_text())
    assert set(helm_values.dask_operator_values()) <= set(defaults)


def test_operator_chart_matches_the_locked_package() -> None:
    from importlib.metadata import version

    chart = helm_values.dask_operator_chart()
    assert (chart.name, chart.repository) == ("dask-kubernetes-operator", "https://helm.dask.org")
    assert chart.version == version("dask-kubernetes")


def test_the_dashboard_shows_each_queues_depth_wait_and_share_of_starts() -> None:
    """issue #45: per request queue, against the SLO and each other."""
    exprs = [expr for panel in dashboard.PANELS for expr, _ in panel.queries]
    M = contract.METRICS
    assert f"histogram_quantile(0.95, sum by (le, queue) (rate({M.queue_wait_seconds}_bucket[5m])))" in exprs
    assert f"max by (queue) ({M.queue_depth})" in exprs
    share = next(e for e in exprs if M.queue_started_total in e)
    assert share.startswith(f"sum by (queue) (rate({M.queue_started_total}[5m])) / ")  # a queue's starts over all
    assert share.endswith(f"group_left sum(rate({M.queue_started_total}[5m]))")
