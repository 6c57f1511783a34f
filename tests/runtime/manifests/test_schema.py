"""Every object the builders make passes its schema: Kubernetes' own (strict: unknown fields fail), and for
the Dask custom resources the CRD schemas shipped inside the locked dask-kubernetes package.

The API server silently prunes fields a CRD schema does not declare, so the CRD check also fails on any
field that would be dropped — a typo there would otherwise vanish without a trace.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from runtime.manifests import common, dashboard, dcgm, network, scheduler
from runtime.manifests import dask as dask_manifests
from runtime.manifests.common import Manifest
from runtime.manifests.helm_values import dask_operator_crds

# A recent Kubernetes minor that GKE's regular channel runs; kubernetes-validate ships its schemas.
K8S_VERSION = "1.33.0"


def _cluster_spec() -> dask_manifests.DaskClusterSpec:
    a100 = dask_manifests.WorkerPoolSpec(
        "a100", "nvidia-tesla-a100", 1, 0, 2, dask_manifests.worker_resources("a2-highgpu-1g", 1)
    )
    t4 = dask_manifests.WorkerPoolSpec(
        "t4", "nvidia-tesla-t4", 2, 1, 6, dask_manifests.worker_resources("n1-standard-16", 2)
    )
    return dask_manifests.DaskClusterSpec(
        image="registry.example/worker:abc123", scheduler_image="registry.example/scheduler:abc123", pools=(a100, t4))


def _core_objects() -> list[Manifest]:
    sched = scheduler.SchedulerSpec(
        project="impulse-gpu-runtime", image="registry.example/scheduler:abc123", result_store="gs://bucket/results"
    )
    return [
        common.namespace("gpu-runtime"),
        common.namespace("monitoring", common.PSA_PRIVILEGED),
        scheduler.build_service_account("gpu-scheduler@p.iam.gserviceaccount.com"),
        scheduler.build_control_token_secret("not-a-real-token"),
        *scheduler.build_rbac(),
        scheduler.build_deployment(sched),
        scheduler.build_service(),
        scheduler.build_pod_disruption_budget(),
        *network.build_runtime_policies(),
        *network.build_compute_policies(),
        dask_manifests.build_runtime_service_account("gpu-runtime@p.iam.gserviceaccount.com"),
        dcgm.build_counters_configmap(),
        dcgm.build_daemonset(),
        dcgm.build_service(),
        dashboard.build_dashboard_configmap(),
    ]


@pytest.mark.parametrize("manifest", _core_objects(), ids=lambda m: f"{m['kind']}/{m['metadata']['name']}")
def test_core_object_passes_strict_kubernetes_schema(manifest: Manifest) -> None:
    kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)


def test_strict_schema_rejects_a_misspelt_field() -> None:
    deployment = scheduler.build_deployment(
        scheduler.SchedulerSpec(project="p", image="i", result_store="gs://b/r")
    )
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContxt"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)


def _crd_schema(kind: str) -> dict[str, Any]:
    """The schema the API server stores for ``kind``: from the locked package's CRDs, as the deploy applies them."""
    (crd,) = [crd for crd in dask_operator_crds() if crd["spec"]["names"]["kind"] == kind]
    (served,) = [v for v in crd["spec"]["versions"] if v["served"] and v["storage"]]
    return served["schema"]["openAPIV3Schema"]


def _pruned_fields(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Paths in ``value`` that the API server would prune under ``schema`` (structural-schema rules)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(value, dict):
        if "properties" not in schema:
            return []  # a map (additionalProperties) or an untyped object
        pruned = []
        for key, item in value.items():
            if key in schema["properties"]:
                pruned += _pruned_fields(item, schema["properties"][key], f"{path}.{key}")
            elif path or key not in ("apiVersion", "kind", "metadata"):
                pruned.append(f"{path}.{key}")
        return pruned
    if isinstance(value, list) and "items" in schema:
        return [p for n, item in enumerate(value) for p in _pruned_fields(item, schema["items"], f"{path}[{n}]")]
    return []


def _dask_objects() -> list[Manifest]:
    spec = _cluster_spec()
    return [
        dask_manifests.build_dask_cluster(spec),
        dask_manifests.build_worker_group(spec, spec.pools[1]),
        dask_manifests.build_autoscaler(spec),
    ]


@pytest.mark.parametrize("manifest", _dask_objects(), ids=lambda m: m["kind"])
def test_dask_custom_resource_matches_its_crd(manifest: Manifest) -> None:
    schema = _crd_schema(manifest["kind"])
    jsonschema.Draft7Validator(schema).validate(manifest)
    assert _pruned_fields(manifest, schema) == []


def test_crd_check_catches_a_field_the_operator_would_never_see() -> None:
    cluster = dask_manifests.build_dask_cluster(_cluster_spec())
    cluster["spec"]["scheduler"]["service"]["metadata"] = {"labels": {"a": "b"}}
    assert _pruned_fields(cluster, _crd_schema("DaskCluster")) == [".spec.scheduler.service.metadata"]
