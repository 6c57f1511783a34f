"""Queued pools at the Kubernetes seam: ``KubernetesPools`` against an in-memory Kubernetes that implements
``KubernetesApi`` (merge patches, label selectors, 404s), with GKE's side played by setting a request's
conditions and the Dask operator's by ``operator_sync`` (one worker Deployment per replica, carrying the
group's worker annotations of the moment it is made). The worker group is the real manifest a stack renders."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fastapi.testclient import TestClient
from kubernetes.client.exceptions import ApiException

from runtime.manifests import dask as dask_manifests
from runtime.manifests import provisioning as prov
from runtime.manifests.worker_group import DESIRED_ANNOTATION
from runtime.protocol import contract
from runtime.scheduler.pools.base import PoolInfo
from runtime.scheduler.pools.kubernetes import KubernetesPools
from runtime.scheduler.pools.kubernetes_api import KubernetesApi
from runtime.scheduler.pools.queued import CONSUMED_ANNOTATION, FAILURE_ANNOTATION
from tests.runtime.scheduler.merge_patch import merge_patch

CLUSTER = "gpu-dask"
QUEUED = dask_manifests.WorkerPoolSpec(
    "a100-flex", "nvidia-tesla-a100", 1, 0, 8, dask_manifests.worker_resources("a2-highgpu-1g", 1),
    node_selector=prov.node_selector("a100-flex"), queued=True,
)
T4 = dask_manifests.WorkerPoolSpec(
    "t4", "nvidia-tesla-t4", 1, 0, 4, dask_manifests.worker_resources("n1-standard-8", 1)
)

SPEC = dask_manifests.DaskClusterSpec(
    image="registry.example/worker:abc123", scheduler_image="registry.example/scheduler:abc123", pools=(T4, QUEUED))
GROUP = "gpu-dask-a100-flex"
DEFAULT_GROUP = "gpu-dask-default"
PROVREQS = prov.PLURAL


def _matches(obj: dict[str, Any], selector: str) -> bool:
    labels = obj["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in (term.split("=", 1) for term in selector.split(",") if term))


def _missing(name: str) -> ApiException:
    return ApiException(status=404, reason=f"{name} not found")


class FakeKubernetes(KubernetesApi):
    """Objects in memory; every call recorded as (method, kind, name)."""

    def __init__(self, *groups: dict[str, Any]) -> None:
        self.custom: dict[tuple[str, str], dict[str, Any]] = {
            ("daskworkergroups", g["metadata"]["name"]): g for g in groups}
        self.templates: dict[str, dict[str, Any]] = {}
        self.deployments: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str, str]] = []
        self._clock = 0

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._clock += 1
        obj["metadata"]["creationTimestamp"] = f"2026-05-01T10:{self._clock // 60:02d}:{self._clock % 60:02d}Z"
        return obj

    def _list(self, kind: str, store: dict[str, dict[str, Any]], label_selector: str) -> dict[str, Any]:
        self.calls.append(("list", kind, ""))
        return {"items": [copy.deepcopy(o) for o in store.values() if _matches(o, label_selector)]}

    def _delete(self, kind: str, store: dict[str, dict[str, Any]], name: str) -> object:
        self.calls.append(("delete", kind, name))
        if store.pop(name, None) is None:
            raise _missing(name)
        return {}

    # --- KubernetesApi ---

    def list_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                      label_selector: str = "") -> dict[str, Any]:
        self.calls.append(("list", plural, ""))
        return {"items": [copy.deepcopy(o) for (p, _), o in sorted(self.custom.items())
                          if p == plural and _matches(o, label_selector)]}

    def patch_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str,
                                       body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("patch", plural, name))
        if (plural, name) not in self.custom:
            raise _missing(name)
        merge_patch(self.custom[(plural, name)], body)
        return copy.deepcopy(self.custom[(plural, name)])

    def create_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                        body: dict[str, Any]) -> dict[str, Any]:
        assert (group, version) == (prov.GROUP, prov.VERSION) and namespace == contract.COMPUTE_NAMESPACE
        name = body["metadata"]["name"]
        self.calls.append(("create", plural, name))
        if (plural, name) in self.custom:
            raise ApiException(status=409, reason="AlreadyExists")
        self.custom[(plural, name)] = self._stamp(copy.deepcopy(body))
        return copy.deepcopy(self.custom[(plural, name)])

    def delete_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                        name: str) -> object:
        self.calls.append(("delete", plural, name))
        if self.custom.pop((plural, name), None) is None:
            raise _missing(name)
        return {}

    def create_namespaced_pod_template(self, namespace: str, body: dict[str, Any]) -> object:
        name = body["metadata"]["name"]
        self.calls.append(("create", "podtemplates", name))
        self.templates[name] = self._stamp(copy.deepcopy(body))
        return self.templates[name]

    def list_namespaced_pod_template(self, namespace: str, label_selector: str = "") -> dict[str, Any]:
        return self._list("podtemplates", self.templates, label_selector)

    def delete_namespaced_pod_template(self, name: str, namespace: str) -> object:
        return self._delete("podtemplates", self.templates, name)

    def list_namespaced_deployment(self, namespace: str, label_selector: str = "") -> dict[str, Any]:
        return self._list("deployments", self.deployments, label_selector)

    def delete_namespaced_deployment(self, name: str, namespace: str) -> object:
        return self._delete("deployments", self.deployments, name)

    # --- GKE's and the Dask operator's side ---

    def group(self, name: str = GROUP) -> dict[str, Any]:
        return self.custom[("daskworkergroups", name)]

    def requests(self) -> dict[str, dict[str, Any]]:
        return {name: obj for (plural, name), obj in self.custom.items() if plural == PROVREQS}

    def set_conditions(self, request: str, **conditions: tuple[str, str, str]) -> None:
        """GKE's answer: condition type -> (status, reason, message)."""
        self.custom[(PROVREQS, request)]["status"] = {"conditions": [
            {"type": t, "status": s, "reason": r, "message": m} for t, (s, r, m) in conditions.items()]}

    def operator_sync(self, name: str = GROUP) -> None:
        """What the Dask operator does on a replicas change: add Deployments (with the worker annotations the
        group has now) or retire the newest."""
        group = self.group(name)
        mine = sorted(d for d, obj in self.deployments.items()
                      if obj["metadata"]["labels"]["dask.org/workergroup-name"] == name)
        replicas = group["spec"]["worker"]["replicas"]
        for worker in mine[replicas:]:
            del self.deployments[worker]
        annotations = dict((group["spec"]["worker"].get("metadata") or {}).get("annotations") or {})
        for n in range(len(mine), replicas):
            worker = f"{name}-worker-{self._clock:04d}{n:02d}"
            self._clock += 1
            self.deployments[worker] = {
                "metadata": {"name": worker, "labels": {"dask.org/workergroup-name": name}},
                "spec": {"template": {"metadata": {"annotations": annotations}}},
            }
        group["status"] = {"readyReplicas": replicas}

    def retire(self, request: str, workers: int) -> None:
        """Dask picked ``workers`` of ``request``'s workers to retire (the operator deletes their Deployments)."""
        mine = [d for d, obj in self.deployments.items()
                if obj["spec"]["template"]["metadata"]["annotations"].get(prov.CONSUME_ANNOTATION) == request]
        for worker in mine[:workers]:
            del self.deployments[worker]

    def writes(self) -> list[tuple[str, str, str]]:
        return [call for call in self.calls if call[0] != "list"]


def _queued_group(name: str = GROUP) -> dict[str, Any]:
    group = dask_manifests.build_worker_group(SPEC, QUEUED)
    group["metadata"]["name"] = name
    group["metadata"]["labels"]["dask.org/cluster-name"] = CLUSTER  # the operator adds it when adopting
    group["spec"]["worker"]["replicas"] = 0
    group["status"] = {"readyReplicas": 0}
    return group


def _t4_group() -> dict[str, Any]:
    group = dask_manifests.build_worker_group(SPEC, T4)
    group["metadata"]["labels"]["dask.org/cluster-name"] = CLUSTER
    group["status"] = {"readyReplicas": 0}
    return group


def _pools(api: FakeKubernetes, leader: bool = True, max_run: int | None = 86400) -> KubernetesPools:
    return KubernetesPools(api, cluster=CLUSTER, queued={"a100-flex": max_run}, is_leader=lambda: leader)


def _only_request(api: FakeKubernetes) -> str:
    [name] = api.requests()
    return name


def _provisioned(api: FakeKubernetes, request: str) -> None:
    api.set_conditions(request, Accepted=("True", "Accepted", ""), Provisioned=("True", "Provisioned", ""))


def _scaled_and_asked(replicas: int) -> tuple[FakeKubernetes, KubernetesPools, str]:
    """The queued pool scaled to ``replicas`` by the leader; with the one provisioning request that asks for them."""
    api = FakeKubernetes(_queued_group())
    pools = _pools(api)
    pools.scale("a100-flex", replicas)
    return api, pools, _only_request(api)


def _two_workers_on_provisioned_capacity() -> tuple[FakeKubernetes, KubernetesPools, str]:
    """The queued pool scaled to 2, its one request provisioned and its workers started; with that request."""
    api, pools, request = _scaled_and_asked(2)
    _provisioned(api, request)
    pools.reconcile()
    api.operator_sync()
    return api, pools, request


def _info(pools: KubernetesPools, pool: str = "a100-flex") -> PoolInfo:
    return next(info for info in pools.list() if info.id == pool)


# --- scaling up ---------------------------------------------------------------------------------------


def test_scale_up_creates_the_request_before_any_worker_is_added() -> None:
    api = FakeKubernetes(_queued_group(), _t4_group())
    info = _pools(api).scale("a100-flex", 2)

    name = _only_request(api)
    request = api.requests()[name]
    assert api.writes() == [("patch", "daskworkergroups", GROUP), ("create", "podtemplates", name),
                            ("create", PROVREQS, name)]
    assert request["spec"] == {"provisioningClassName": "queued-provisioning.gke.io",
                               "podSets": [{"count": 2, "podTemplateRef": {"name": name}}],
                               "parameters": {"maxRunDurationSeconds": "86400"}}
    # The request asks for exactly the workers' pods.
    assert api.templates[name]["template"]["spec"] == api.group()["spec"]["worker"]["spec"]
    group = api.group()
    assert group["spec"]["worker"]["replicas"] == 0  # no worker before GKE has the capacity
    assert group["metadata"]["annotations"][DESIRED_ANNOTATION] == "2"
    assert (info.desired, info.workers, info.status) == (2, 0, "scaling")
    assert info.provisioning is not None and [r.name for r in info.provisioning.requests] == [name]


def test_workers_are_added_with_the_consume_annotations_once_the_request_is_provisioned() -> None:
    api, pools, name = _scaled_and_asked(2)

    api.set_conditions(name, Accepted=("True", "Accepted", ""),
                       Provisioned=("False", "QuotaExceeded", "Quota 'NVIDIA_A100_GPUS' exceeded."))
    pools.reconcile()
    assert api.group()["spec"]["worker"]["replicas"] == 0 and list(api.requests()) == [name]

    _provisioned(api, name)
    pools.reconcile()
    worker = api.group()["spec"]["worker"]
    assert worker["replicas"] == 2
    assert worker["metadata"]["annotations"] == {
        "autoscaling.x-k8s.io/consume-provisioning-request": name,
        "autoscaling.x-k8s.io/provisioning-class-name": "queued-provisioning.gke.io",
        contract.DASK_WORKER_TEMPLATE_ANNOTATION: worker["metadata"]["annotations"][
            contract.DASK_WORKER_TEMPLATE_ANNOTATION],  # the template's own, kept
    }
    assert api.group()["metadata"]["annotations"][CONSUMED_ANNOTATION] == name
    api.operator_sync()
    assert [d["spec"]["template"]["metadata"]["annotations"][prov.CONSUME_ANNOTATION]
            for d in api.deployments.values()] == [name, name]
    pools.reconcile()
    assert list(api.requests()) == [name] and len(api.deployments) == 2  # nothing more asked, nothing undone


def test_conditions_are_reported_in_the_pool_status() -> None:
    api, pools, name = _scaled_and_asked(3)

    assert _info(pools).provisioning.requests[0].state == "pending"  # type: ignore[union-attr]
    api.set_conditions(name, Accepted=("True", "Accepted", ""),
                       Provisioned=("False", "ResourcePoolExhausted", "Expected time is indefinite"))
    waiting = _info(pools).provisioning
    assert waiting is not None and waiting.max_run_duration_s == 86400 and waiting.failure is None
    [request] = waiting.requests
    assert (request.name, request.workers, request.state, request.consumed) == (name, 3, "accepted", False)
    assert (request.reason, request.message) == ("ResourcePoolExhausted", "Expected time is indefinite")
    assert request.conditions == {"Accepted": "True", "Provisioned": "False"}

    _provisioned(api, name)
    pools.reconcile()
    [request] = _info(pools).provisioning.requests  # type: ignore[union-attr]
    assert (request.state, request.consumed) == ("provisioned", True)


def test_get_pools_shows_the_provisioning_field(tmp_path: Any) -> None:
    from runtime.scheduler.api import create_app
    from runtime.scheduler.service import Service
    from runtime.scheduler.settings import Settings

    api = FakeKubernetes(_queued_group(), _t4_group())
    service = Service(Settings.from_env({"GPURT_RESULT_STORE": str(tmp_path), "GPURT_CONTROL_TOKEN": "t"}))
    service.pools = _pools(api)
    service.pools.scale("a100-flex", 1)
    api.set_conditions(_only_request(api), Accepted=("True", "Accepted", ""))

    client = TestClient(create_app(service), headers={"Authorization": "Bearer t"})
    body = {pool["id"]: pool for pool in client.get("/pools").json()}
    assert body["t4"]["provisioning"] is None
    [request] = body["a100-flex"]["provisioning"]["requests"]
    assert request["state"] == "accepted" and request["conditions"] == {"Accepted": "True"}


def test_the_pool_asks_only_for_what_outstanding_requests_do_not_cover() -> None:
    api, pools, first = _two_workers_on_provisioned_capacity()

    pools.scale("a100-flex", 5)
    [second] = set(api.requests()) - {first}
    assert api.requests()[second]["spec"]["podSets"][0]["count"] == 3
    pools.reconcile()
    assert len(api.requests()) == 2  # pending, already asked for: no third request


def test_two_provisioned_requests_are_added_one_at_a_time_so_each_worker_gets_its_own() -> None:
    api = FakeKubernetes(_queued_group())
    pools = KubernetesPools(api, cluster=CLUSTER, queued={"a100-flex": None},
                            token=iter(["pr-a", "pr-b"]).__next__)
    pools.scale("a100-flex", 2)
    pools.scale("a100-flex", 4)
    first, second = f"{GROUP}-pr-a", f"{GROUP}-pr-b"
    assert set(api.requests()) == {first, second}
    _provisioned(api, first)
    _provisioned(api, second)

    pools.reconcile()
    assert api.group()["spec"]["worker"]["replicas"] == 2  # the operator has not made the first ones yet
    pools.reconcile()
    assert api.group()["spec"]["worker"]["replicas"] == 2
    api.operator_sync()
    pools.reconcile()
    api.operator_sync()
    consumed = [d["spec"]["template"]["metadata"]["annotations"][prov.CONSUME_ANNOTATION]
                for _, d in sorted(api.deployments.items())]
    assert consumed == [first, first, second, second]
    assert api.group()["metadata"]["annotations"][CONSUMED_ANNOTATION] == f"{first},{second}"


# --- failures, revocations, expiries ------------------------------------------------------------------


def test_a_failed_request_is_deleted_reported_and_not_retried_until_the_pool_is_scaled_again() -> None:
    api, pools, failed = _scaled_and_asked(2)
    api.set_conditions(failed, Failed=("True", "ResourcePoolExhausted", "no a2-highgpu-1g in us-central1"))

    pools.reconcile()
    assert api.requests() == {} and api.templates == {}
    info = _info(pools)
    assert info.desired == 2 and info.workers == 0 and info.status == "scaling"
    assert info.provisioning is not None
    assert info.provisioning.failure == f"{failed}: ResourcePoolExhausted: no a2-highgpu-1g in us-central1"
    pools.reconcile()
    assert api.requests() == {}  # held off: no request every ten seconds against a refusal

    pools.scale("a100-flex", 2)  # the operator asks again
    assert FAILURE_ANNOTATION not in api.group()["metadata"]["annotations"]
    [retry] = api.requests()
    assert retry != failed and _info(pools).provisioning.failure is None  # type: ignore[union-attr]


def test_revoked_capacity_takes_its_workers_with_it_and_is_asked_for_again() -> None:
    api, pools, revoked = _two_workers_on_provisioned_capacity()
    assert len(api.deployments) == 2

    api.set_conditions(revoked, Provisioned=("True", "Provisioned", ""),
                       CapacityRevoked=("True", "MaxRunDurationReached", "nodes reached maxRunDurationSeconds"))
    pools.reconcile()

    assert api.deployments == {}  # their pods could never be placed again
    assert api.group()["spec"]["worker"]["replicas"] == 0
    [again] = api.requests()
    assert again != revoked and revoked not in api.templates
    assert api.requests()[again]["spec"]["podSets"][0]["count"] == 2
    assert CONSUMED_ANNOTATION not in api.group()["metadata"]["annotations"]


def test_a_booking_that_expired_before_its_workers_were_added_is_asked_for_again() -> None:
    api = FakeKubernetes(_queued_group())
    pools = _pools(api, leader=False)
    pools.scale("a100-flex", 1)  # recorded by a standby; the leader was away
    leader = _pools(api)
    leader.reconcile()
    expired = _only_request(api)
    api.set_conditions(expired, Provisioned=("True", "Provisioned", ""), BookingExpired=("True", "", ""))

    leader.reconcile()
    [again] = api.requests()
    assert again != expired and api.group()["spec"]["worker"]["replicas"] == 0


# --- scaling down -------------------------------------------------------------------------------------


def test_scale_down_retires_workers_at_once_and_deletes_their_requests_once_they_are_gone() -> None:
    api = FakeKubernetes(_queued_group())
    pools = KubernetesPools(api, cluster=CLUSTER, queued={"a100-flex": None}, token=iter(["pr-a", "pr-b"]).__next__)
    pools.scale("a100-flex", 2)
    _provisioned(api, f"{GROUP}-pr-a")
    pools.reconcile()
    api.operator_sync()
    pools.scale("a100-flex", 4)
    _provisioned(api, f"{GROUP}-pr-b")
    pools.reconcile()
    api.operator_sync()
    assert len(api.deployments) == 4

    pools.scale("a100-flex", 2)
    assert api.group()["spec"]["worker"]["replicas"] == 2
    assert len(api.requests()) == 2  # Dask has not retired anyone yet: both requests still carry workers
    api.retire(f"{GROUP}-pr-b", 2)  # Dask chose b's two
    pools.reconcile()
    assert set(api.requests()) == {f"{GROUP}-pr-a"} and set(api.templates) == {f"{GROUP}-pr-a"}

    pools.stop("a100-flex")
    api.operator_sync()
    pools.reconcile()
    assert api.requests() == {} and api.templates == {}
    assert CONSUMED_ANNOTATION not in api.group()["metadata"]["annotations"]


def test_scaling_down_cancels_requests_still_queued() -> None:
    api, pools, queued = _scaled_and_asked(3)
    api.set_conditions(queued, Accepted=("True", "Accepted", ""))

    pools.scale("a100-flex", 1)
    [smaller] = api.requests()
    assert queued not in api.templates and smaller != queued
    assert api.requests()[smaller]["spec"]["podSets"][0]["count"] == 1
    pools.stop("a100-flex")
    assert api.requests() == {} and api.templates == {}


def test_a_leftover_pod_template_is_swept() -> None:
    api = FakeKubernetes(_queued_group())
    template, _ = prov.build_provisioning(_queued_group(), "a100-flex", CLUSTER, f"{GROUP}-pr-lost", 1)
    api.templates[template["metadata"]["name"]] = template  # a leader stopped between the two deletes
    _pools(api).reconcile()
    assert api.templates == {}


# --- who does what ------------------------------------------------------------------------------------


def test_a_non_leader_records_the_size_and_touches_no_request() -> None:
    api = FakeKubernetes(_queued_group())
    standby = _pools(api, leader=False)
    standby.scale("a100-flex", 2)
    assert api.writes() == [("patch", "daskworkergroups", GROUP)]
    assert api.group()["metadata"]["annotations"][DESIRED_ANNOTATION] == "2"

    leader = _pools(api)
    leader.reconcile()
    name = _only_request(api)
    _provisioned(api, name)
    before = len(api.writes())
    standby.reconcile()
    assert api.writes()[before:] == [] and api.group()["spec"]["worker"]["replicas"] == 0
    assert _info(standby).provisioning.requests[0].state == "provisioned"  # type: ignore[union-attr]


def test_a_pool_that_is_not_queued_never_touches_requests() -> None:
    api = FakeKubernetes(_queued_group(), _t4_group())
    pools = _pools(api)
    pools.scale("t4", 3)
    pools.reconcile()

    assert api.group("gpu-dask-t4")["spec"]["worker"]["replicas"] == 3  # at once, as ever
    assert [w for w in api.writes() if w[2] == "gpu-dask-t4" or w[1] != "daskworkergroups"] == [
        ("patch", "daskworkergroups", "gpu-dask-t4")]
    assert _info(pools, "t4").provisioning is None
    plain = FakeKubernetes(_t4_group())
    KubernetesPools(plain, cluster=CLUSTER).list()
    assert {kind for _, kind, _ in plain.calls} == {"daskworkergroups"}  # no queued pools: no request listed


def test_a_queued_primary_pool_pins_the_autoscaler_after_its_workers_are_added() -> None:
    api = FakeKubernetes(_queued_group(DEFAULT_GROUP))
    autoscaler = {"metadata": {"name": f"{CLUSTER}{contract.DASK_AUTOSCALER_SUFFIX}"},
                  "spec": {"cluster": CLUSTER, "minimum": 0, "maximum": 0}}
    api.custom[("daskautoscalers", autoscaler["metadata"]["name"])] = autoscaler
    pools = _pools(api)
    pools.scale("a100-flex", 2)
    assert autoscaler["spec"]["maximum"] == 0  # nothing added yet: the autoscaler may not add anything

    _provisioned(api, _only_request(api))
    pools.reconcile()
    patches = [name for method, _, name in api.writes() if method == "patch"]
    assert patches[-2:] == [DEFAULT_GROUP, autoscaler["metadata"]["name"]]  # group (annotated) first
    assert autoscaler["spec"] == {"cluster": CLUSTER, "minimum": 2, "maximum": 2}


@pytest.mark.parametrize("leader", (True, False))
def test_a_queued_pool_above_its_size_is_brought_down_by_the_leader(leader: bool) -> None:
    api = FakeKubernetes(_queued_group())
    pools = _pools(api, leader=leader)
    pools.scale("a100-flex", 0)
    api.group()["spec"]["worker"]["replicas"] = 2  # someone scaled it by hand
    pools.reconcile()
    assert api.group()["spec"]["worker"]["replicas"] == (0 if leader else 2)


def test_the_queued_pools_setting_is_read_as_the_stack_renders_it() -> None:
    from runtime.manifests.scheduler import queued_pools_setting
    from runtime.scheduler.settings import Settings, SettingsError

    rendered = queued_pools_setting({"a100-flex": 86400, "h100": None})
    parsed = Settings.from_env({contract.SchedulerEnv.QUEUED_POOLS: rendered})
    assert parsed.queued_pools == {"a100-flex": 86400, "h100": None}
    assert Settings.from_env({}).queued_pools == {}
    with pytest.raises(SettingsError, match="GPURT_QUEUED_POOLS"):
        Settings.from_env({contract.SchedulerEnv.QUEUED_POOLS: "a100-flex=soon"})
