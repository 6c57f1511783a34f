"""Kubernetes pools against a recording stand-in of CustomObjectsApi (real DaskWorkerGroup shapes)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from runtime.manifests.worker_group import DESIRED_ANNOTATION
from runtime.protocol import contract
from runtime.scheduler.pools.base import PoolError, PoolNotFound
from runtime.scheduler.pools.kubernetes import KubernetesPools


def _group(pool: str, replicas: int, ready: int, name: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "kubernetes.dask.org/v1", "kind": "DaskWorkerGroup",
        "metadata": {"name": name or f"gpu-dask-{pool}", "namespace": "compute",
                     "labels": {"dask.org/cluster-name": "gpu-dask"}},
        "spec": {"cluster": "gpu-dask", "worker": {
            "replicas": replicas,
            "metadata": {"labels": {contract.DASK_POOL_LABEL: pool}},
            "spec": {"containers": [{"name": "worker", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
        "status": {"readyReplicas": ready},
    }


class RecordingCustomObjects:
    """Keeps worker groups in memory; records every call."""

    def __init__(self, *groups: dict[str, Any], autoscaler: dict[str, Any] | None = None) -> None:
        self.groups = {g["metadata"]["name"]: g for g in groups}
        self.autoscaler = autoscaler
        self.calls: list[tuple[str, tuple]] = []

    def list_namespaced_custom_object(self, group, version, namespace, plural, label_selector=""):
        self.calls.append(("list", (group, version, namespace, plural, label_selector)))
        return {"items": [copy.deepcopy(g) for g in self.groups.values()]}

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        self.calls.append(("get", (namespace, plural, name)))
        if name not in self.groups:
            raise ApiException(status=404, reason="Not Found")
        return copy.deepcopy(self.groups[name])

    def patch_namespaced_custom_object(self, group, version, namespace, plural, name, body):
        self.calls.append(("patch", (namespace, plural, name, copy.deepcopy(body))))
        if plural == "daskautoscalers":
            if self.autoscaler is None or self.autoscaler["metadata"]["name"] != name:
                raise ApiException(status=404, reason="Not Found")
            self.autoscaler["spec"].update(body["spec"])
            return copy.deepcopy(self.autoscaler)
        target = self.groups[name]
        target["spec"]["worker"]["replicas"] = body["spec"]["worker"]["replicas"]
        annotations = body.get("metadata", {}).get("annotations")
        if annotations:
            target["metadata"].setdefault("annotations", {}).update(annotations)
        return copy.deepcopy(target)


def test_list_reports_pools_with_gpus() -> None:
    api = RecordingCustomObjects(_group("a100", 2, 2), _group("t4", 1, 0))
    pools = KubernetesPools(api)
    listed = {p.id: p for p in pools.list()}
    assert listed["a100"].workers == 2 and listed["a100"].status == "running"
    assert listed["t4"].status == "scaling" and listed["t4"].gpus_per_worker == 1
    assert api.calls[0][1][-1] == "dask.org/cluster-name=gpu-dask"
    assert pools.gpu_slots() == 3


def test_scale_and_stop_patch_replicas_and_record_the_desired_size() -> None:
    evicted: list[str] = []
    api = RecordingCustomObjects(_group("a100", 2, 2), _group("t4", 1, 1))
    pools = KubernetesPools(api, on_evict=evicted.append)
    pools.scale("a100", 4)
    assert api.calls[-1] == ("patch", ("compute", "daskworkergroups", "gpu-dask-a100", {
        "spec": {"worker": {"replicas": 4}}, "metadata": {"annotations": {DESIRED_ANNOTATION: "4"}}}))
    pools.stop_all()
    assert all(g["spec"]["worker"]["replicas"] == 0 for g in api.groups.values())
    assert evicted == ["a100", "t4"]


def test_reconcile_restores_the_recorded_size_after_drift() -> None:
    api = RecordingCustomObjects(_group("a100", 2, 2))
    pools = KubernetesPools(api)
    pools.stop("a100")
    api.groups["gpu-dask-a100"]["spec"]["worker"]["replicas"] = 3  # someone scaled it by hand
    pools.reconcile()
    assert api.groups["gpu-dask-a100"]["spec"]["worker"]["replicas"] == 0


def test_unknown_pool_and_bad_sizes_are_clear_errors() -> None:
    pools = KubernetesPools(RecordingCustomObjects(_group("a100", 1, 1)))
    with pytest.raises(PoolNotFound, match="gpu-dask-v100"):
        pools.scale("v100", 1)
    with pytest.raises(PoolError, match="between 0 and"):
        pools.scale("a100", 10_000)


def test_the_primary_pool_is_named_by_its_label_and_scaling_it_pins_the_autoscaler() -> None:
    autoscaler = {"metadata": {"name": "gpu-dask-autoscaler"}, "spec": {"cluster": "gpu-dask", "minimum": 0,
                                                                         "maximum": 8}}
    api = RecordingCustomObjects(_group("a100", 2, 2, name="gpu-dask-default"), _group("t4", 1, 1),
                                 autoscaler=autoscaler)
    pools = KubernetesPools(api)
    assert sorted(p.id for p in pools.list()) == ["a100", "t4"]
    pools.stop("a100")
    assert api.groups["gpu-dask-default"]["spec"]["worker"]["replicas"] == 0
    assert autoscaler["spec"]["minimum"] == autoscaler["spec"]["maximum"] == 0  # the autoscaler cannot undo it
    pools.scale("t4", 3)  # a secondary group: the autoscaler is left alone
    assert autoscaler["spec"]["maximum"] == 0 and api.groups["gpu-dask-t4"]["spec"]["worker"]["replicas"] == 3


def test_a_secondary_pool_is_held_to_the_stacks_dask_workers_max() -> None:
    """The bound reaches the rendered DaskWorkerGroup, and scaling beyond it is refused (no autoscaler bounds it)."""
    from components.dask import worker_pools
    from runtime.manifests import dask as manifests
    from tests.components.infra import stack_config

    config = stack_config("production")
    pools = worker_pools(config.gpu_pools)
    spec = manifests.DaskClusterSpec(image="img", scheduler_image="scheduler-img", pools=tuple(pools), name="gpu-dask")
    t4 = next(p for p in config.gpu_pools if p.name == "t4-spot")
    group = manifests.build_worker_group(spec, next(p for p in pools if p.name == "t4-spot"))
    assert group["metadata"]["annotations"][contract.DASK_MAX_WORKERS_ANNOTATION] == str(t4.dask_workers_max)
    group["metadata"]["labels"]["dask.org/cluster-name"] = "gpu-dask"  # what the operator adds
    group["status"] = {"readyReplicas": 0}
    api = RecordingCustomObjects(group)

    assert KubernetesPools(api).scale("t4-spot", t4.dask_workers_max).desired == t4.dask_workers_max
    with pytest.raises(PoolError, match=f"pool t4-spot may have at most {t4.dask_workers_max} workers "
                                        r"\(the stack's daskWorkersMax\), not 33"):
        KubernetesPools(api).scale("t4-spot", t4.dask_workers_max + 1)
    assert api.groups[group["metadata"]["name"]]["spec"]["worker"]["replicas"] == t4.dask_workers_max
