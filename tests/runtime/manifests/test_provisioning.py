"""The queued-provisioning builder: a PodTemplate that is exactly the worker group's pods (and passes the strict
Kubernetes schema), a ProvisioningRequest with GKE's fields (no schema ships for it, so each is asserted),
names within Kubernetes' limits, and the Dask side a queued pool needs (its node pool, no autoscaling)."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from components.dask import worker_pools
from runtime.manifests import dask as dask_manifests
from runtime.manifests import gpu_options
from runtime.manifests import provisioning as prov
from runtime.manifests.common import gpu_toleration
from runtime.protocol import contract
from runtime.scheduler.pools.queued import request_token
from tests.components.infra import stack_config
from tests.runtime.manifests.test_schema import K8S_VERSION, _crd_schema, _pruned_fields

QUEUED = dask_manifests.WorkerPoolSpec(
    "a100-flex", "nvidia-tesla-a100", 1, 0, 8, dask_manifests.worker_resources("a2-highgpu-1g", 1),
    node_selector=prov.node_selector("a100-flex"), queued=True,
)
T4 = dask_manifests.WorkerPoolSpec(
    "t4", "nvidia-tesla-t4", 1, 0, 4, dask_manifests.worker_resources("n1-standard-8", 1)
)


def _spec(*pools: dask_manifests.WorkerPoolSpec) -> dask_manifests.DaskClusterSpec:
    return dask_manifests.DaskClusterSpec(
        image="registry.example/worker:abc123", scheduler_image="registry.example/scheduler:abc123", pools=pools)


def _group() -> dict[str, Any]:
    return dask_manifests.build_worker_group(_spec(T4, QUEUED), QUEUED)


def _objects(workers: int = 3, max_run: int | None = 3600) -> tuple[dict[str, Any], dict[str, Any]]:
    return prov.build_provisioning(_group(), "a100-flex", "gpu-dask", "gpu-dask-a100-flex-pr-0123456789", workers,
                                   max_run)


def test_the_pod_template_passes_the_strict_kubernetes_schema() -> None:
    template, _ = _objects()
    kubernetes_validate.validate(template, K8S_VERSION, strict=True)


def test_the_strict_schema_would_catch_a_template_that_is_not_a_pod_spec() -> None:
    template, _ = _objects()
    template["template"]["spec"]["nodeSelectr"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(template, K8S_VERSION, strict=True)


def test_the_pod_template_is_the_worker_groups_pods() -> None:
    group = _group()
    template, _ = _objects()
    spec = template["template"]["spec"]

    assert spec == group["spec"]["worker"]["spec"]
    assert template["template"]["metadata"]["labels"] == group["spec"]["worker"]["metadata"]["labels"]
    # What GKE sizes the nodes by: the GPU, the GPU nodes of this pool only, the GPU taint tolerated.
    [worker] = spec["containers"]
    assert worker["resources"]["limits"][contract.GPU_RESOURCE] == "1"
    assert spec["nodeSelector"][gpu_options.NODE_POOL_LABEL] == "gpu-a100-flex"
    assert spec["nodeSelector"][dask_manifests.GKE_ACCELERATOR_LABEL] == "nvidia-tesla-a100"
    assert gpu_toleration() in spec["tolerations"]
    # A copy: the runtime's group object is not tied to what is sent.
    spec["nodeSelector"].clear()
    assert group["spec"]["worker"]["spec"]["nodeSelector"]


def test_the_pod_template_is_labelled_for_gke_and_the_pool() -> None:
    template, _ = _objects()
    meta = template["metadata"]

    assert (meta["name"], meta["namespace"]) == ("gpu-dask-a100-flex-pr-0123456789", contract.COMPUTE_NAMESPACE)
    assert meta["labels"]["cloud.google.com/apply-warden-policies"] == "true"
    assert meta["labels"][contract.DASK_POOL_LABEL] == "a100-flex"
    assert meta["labels"][prov.CLUSTER_LABEL] == "gpu-dask"
    assert meta["labels"]["managed-by"] == contract.SCHEDULER_DEPLOYMENT  # the scheduler, not Pulumi


def test_the_provisioning_request_asks_gke_for_the_workers() -> None:
    template, request = _objects(workers=3, max_run=3600)

    assert request["apiVersion"] == "autoscaling.x-k8s.io/v1"
    assert request["kind"] == "ProvisioningRequest"
    assert request["metadata"]["name"] == template["metadata"]["name"]
    assert request["metadata"]["namespace"] == contract.COMPUTE_NAMESPACE
    assert request["metadata"]["labels"] == {**contract.COMMON_LABELS, "managed-by": "gpu-scheduler",
                                             contract.DASK_POOL_LABEL: "a100-flex", prov.CLUSTER_LABEL: "gpu-dask"}
    assert request["spec"] == {
        "provisioningClassName": "queued-provisioning.gke.io",
        "podSets": [{"count": 3, "podTemplateRef": {"name": template["metadata"]["name"]}}],
        "parameters": {"maxRunDurationSeconds": "3600"},  # the API's parameters are strings
    }


def test_without_a_run_duration_gke_uses_its_default() -> None:
    _, request = _objects(max_run=None)
    assert "parameters" not in request["spec"]


@pytest.mark.parametrize(("workers", "max_run", "error"), [
    (0, None, "at least one pod"),
    (1, 0, "maxRunDurationSeconds must be 1..604800"),
    (1, 7 * 24 * 3600 + 1, "maxRunDurationSeconds must be 1..604800"),
])
def test_impossible_requests_are_refused(workers: int, max_run: int | None, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        _objects(workers, max_run)


def test_the_consume_annotations_are_gkes() -> None:
    assert prov.consume_annotations("r1") == {
        "autoscaling.x-k8s.io/consume-provisioning-request": "r1",
        "autoscaling.x-k8s.io/provisioning-class-name": "queued-provisioning.gke.io",
    }


def test_names_stay_dns_labels_for_the_longest_pool_name() -> None:
    # worker_group_name allows a pool name only while its workers' pod names fit; the request's must fit too.
    longest = "p" * (dask_manifests.MAX_NAME_LENGTH - dask_manifests.WORKER_POD_SUFFIX_LENGTH - len("gpu-dask-"))
    group = dask_manifests.worker_group_name("gpu-dask", longest, primary=False)
    name = prov.request_name(group, request_token())
    assert len(name) <= prov.MAX_NAME_LENGTH
    with pytest.raises(ValueError, match="DNS label"):
        prov.request_name(group + "x" * 20, request_token())
    with pytest.raises(ValueError, match="DNS label"):
        prov.request_name("Gpu-Dask", "pr-1")
    with pytest.raises(ValueError, match="DNS label"):
        prov.request_name("gpu-dask", "pr-1\n")  # a final newline passed a `$` check


def test_a_worker_group_carrying_the_consume_annotations_keeps_them_through_its_crd() -> None:
    # How the scheduler adds a request's workers: the annotations on spec.worker.metadata, which the operator
    # copies onto each worker it creates; the CRD must not prune them.
    group = copy.deepcopy(_group())
    group["spec"]["worker"]["metadata"]["annotations"] = prov.consume_annotations("gpu-dask-a100-flex-pr-1")
    schema = _crd_schema("DaskWorkerGroup")
    jsonschema.Draft7Validator(schema).validate(group)
    assert _pruned_fields(group, schema) == []


def test_a_queued_pools_workers_select_its_node_pool_and_others_do_not() -> None:
    config = stack_config("production")
    raw_pools = [pool.model_copy(update={"queued_provisioning": True}) if pool.name == "v100" else pool
                 for pool in config.gpu_pools]
    pools = {pool.name: pool for pool in worker_pools(raw_pools)}

    assert pools["v100"].queued and pools["v100"].node_selector == {gpu_options.NODE_POOL_LABEL: "gpu-v100"}
    assert not pools["t4-spot"].queued and gpu_options.NODE_POOL_LABEL not in pools["t4-spot"].node_selector


def test_a_queued_primary_pool_is_never_autoscaled_and_has_no_standing_workers() -> None:
    assert dask_manifests.build_autoscaler(_spec(QUEUED, T4))["spec"] == {
        "cluster": "gpu-dask", "minimum": 0, "maximum": 0}
    assert dask_manifests.build_autoscaler(_spec(T4, QUEUED))["spec"]["maximum"] == T4.max_workers
    with pytest.raises(ValueError, match="starts without workers"):
        dask_manifests.WorkerPoolSpec("q", "nvidia-tesla-a100", 1, 1, 2,
                                      dask_manifests.worker_resources("a2-highgpu-1g", 1), queued=True)
