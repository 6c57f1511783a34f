"""Rolling workers onto a new template: a real Dask scheduler and workers on loopback, the worker Deployments and
groups in an in-memory stand-in of the Kubernetes API that behaves like the operator's objects.

The jobs are tasks that wait on a gate the test opens, so each step is decided, never timed.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from runtime.manifests.worker_group import DESIRED_ANNOTATION
from runtime.protocol import contract
from runtime.scheduler.pools.kubernetes import KubernetesPools
from runtime.scheduler.pools.rollout import (
    SURGE_ANNOTATION,
    ClientWorkers,
    DaskWorker,
    WorkerRollout,
    merge_replacing,
)
from tests.runtime.scheduler.merge_patch import merge_patch

pytestmark = [pytest.mark.integration]

GROUP = "gpu-dask-t4"
OLD, NEW = f"{GROUP}-worker-0000000old", f"{GROUP}-worker-0000000new"
GATES: dict[str, threading.Event] = {}
STARTED: dict[Any, list[Any]] = {}  # workers each test started, closed with its cluster
GATE_WAIT_S = 60  # a bound on a test's job, never reached when the test passes


def _job(gate: str, hold_on: str | None = None) -> str:
    """A job: waits for ``gate`` (only on worker ``hold_on`` when given) and returns its worker's name."""
    from distributed import get_worker

    name = str(get_worker().name)
    if hold_on is None or name == hold_on:
        GATES[gate].wait(GATE_WAIT_S)
    return name


def _template(image: str, digest: str, gpus: int = 1) -> dict[str, Any]:
    limits = {contract.GPU_RESOURCE: str(gpus)} if gpus else {"cpu": "1"}
    return {
        "metadata": {
            "labels": {contract.DASK_POOL_LABEL: "t4" if gpus else contract.CPU_POOL},
            "annotations": {contract.DASK_WORKER_TEMPLATE_ANNOTATION: digest},
        },
        "spec": {"containers": [{"name": "worker", "image": image, "resources": {"limits": limits}}]},
    }


def _group(name: str, replicas: int, template: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "compute",
            "resourceVersion": "1",
            "labels": {"dask.org/cluster-name": "gpu-dask"},
        },
        "spec": {"cluster": "gpu-dask", "worker": {"replicas": replicas, **copy.deepcopy(template)}},
    }


def _deployment(name: str, group: str, template: dict[str, Any]) -> dict[str, Any]:
    # What the operator makes: the template's metadata and pod spec copied into the Deployment's pod template.
    return {
        "metadata": {"name": name, "labels": {"dask.org/workergroup-name": group}},
        "spec": {"template": copy.deepcopy(template)},
    }


class FakeKubernetes:
    """DaskClusters, DaskWorkerGroups and worker Deployments in memory; a patch naming an old resourceVersion
    fails with 409 as the API server's does."""

    def __init__(
        self, groups: list[dict[str, Any]], deployments: list[dict[str, Any]], clusters: list[dict[str, Any]] = ()
    ) -> None:  # type: ignore[assignment]
        self.groups = {g["metadata"]["name"]: g for g in groups}
        self.deployments = {d["metadata"]["name"]: d for d in deployments}
        self.clusters = list(clusters)
        self.patches: list[tuple[str, dict[str, Any]]] = []

    def list_namespaced_custom_object(self, group, version, namespace, plural, label_selector=""):
        items = self.clusters if plural == "daskclusters" else list(self.groups.values())
        return {"items": copy.deepcopy(items)}

    def patch_namespaced_custom_object(self, group, version, namespace, plural, name, body):
        target = self.groups[name]
        version_wanted = (body.get("metadata") or {}).get("resourceVersion")
        if version_wanted is not None and version_wanted != target["metadata"]["resourceVersion"]:
            raise ApiException(status=409, reason="Conflict")
        self.patches.append((name, copy.deepcopy(body)))
        merge_patch(target, {k: v for k, v in body.items()})
        target["metadata"]["resourceVersion"] = str(int(target["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(target)

    def list_namespaced_deployment(self, namespace, label_selector=""):
        group = label_selector.split("=", 1)[1]
        return {
            "items": [
                copy.deepcopy(d)
                for d in self.deployments.values()
                if d["metadata"]["labels"]["dask.org/workergroup-name"] == group
            ]
        }

    def delete_namespaced_deployment(self, name, namespace):
        if self.deployments.pop(name, None) is None:
            raise ApiException(status=404, reason="Not Found")


@pytest.fixture()
def dask() -> Iterator[tuple[Any, Any]]:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster, Client(cluster) as client:
        try:
            yield cluster, client
        finally:
            for gate in GATES.values():
                gate.set()  # frees a job thread a retired worker left behind, before the workers close
            GATES.clear()
            for worker in STARTED.pop(cluster, []):
                cluster.sync(worker.close)


def _start_worker(cluster: Any, name: str, resource: str = contract.DASK_GPU_RESOURCE) -> str:
    from distributed import Worker

    async def start() -> Any:
        return await Worker(
            cluster.scheduler_address, name=name, nthreads=1, resources={resource: 1}, dashboard_address=None
        )

    worker = cluster.sync(start)
    STARTED.setdefault(cluster, []).append(worker)
    return str(worker.address)


def _gate(name: str) -> str:
    GATES[name] = threading.Event()
    return name


def _status(client: Any, name: str) -> str | None:
    for worker in client.scheduler_info(n_workers=-1)["workers"].values():
        if worker["name"] == name:
            return str(worker["status"])
    return None


def _wait_running(client: Any, future: Any) -> None:
    """Until the scheduler has the job on a worker (the scheduler's own state, polled by Dask's client)."""
    import time

    deadline = time.monotonic() + GATE_WAIT_S
    while not any(future.key in keys for keys in client.processing().values()):
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.01)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _rollout(api: FakeKubernetes, client: Any, clock: Clock | None = None) -> WorkerRollout:
    return WorkerRollout(
        api,
        ClientWorkers(client),
        "gpu-dask",
        "compute",
        pool_of=lambda g: g["spec"]["worker"]["metadata"]["labels"][contract.DASK_POOL_LABEL],
        clock=clock or Clock(),
    )


def test_an_old_image_worker_finishes_its_job_takes_no_new_one_and_then_leaves(dask: tuple[Any, Any]) -> None:
    cluster, client = dask
    old_template, new_template = _template("worker@sha256:1", "t1"), _template("worker@sha256:2", "t1")
    api = FakeKubernetes(
        [_group(GROUP, 2, new_template)], [_deployment(OLD, GROUP, old_template), _deployment(NEW, GROUP, new_template)]
    )
    old_address = _start_worker(cluster, OLD)
    _start_worker(cluster, NEW)
    running = client.submit(
        _job, _gate("running"), workers=[old_address], resources={contract.DASK_GPU_RESOURCE: 1}, pure=False
    )
    _wait_running(client, running)
    rollout = _rollout(api, client)

    rollout.step(list(api.groups.values()))
    assert _status(client, OLD) == "closing_gracefully" and OLD in api.deployments
    # A new job goes to the new worker only; the draining one keeps running its job.
    fresh = client.submit(_job, _gate("fresh"), resources={contract.DASK_GPU_RESOURCE: 1}, pure=False)
    GATES["fresh"].set()
    assert fresh.result(timeout=GATE_WAIT_S) == NEW
    rollout.step(list(api.groups.values()))
    assert OLD in api.deployments and _status(client, OLD) == "closing_gracefully"

    GATES["running"].set()
    assert running.result(timeout=GATE_WAIT_S) == OLD  # finished where it ran: nothing lost, nothing rerun
    rollout.step(list(api.groups.values()))
    assert _status(client, OLD) is None and set(api.deployments) == {NEW}
    # One Deployment fewer, then one replica fewer: the operator retires nothing else; the recorded size brings
    # the replica back (KubernetesPools.reconcile), made from the new template.
    group = api.groups[GROUP]
    assert group["spec"]["worker"]["replicas"] == 1
    assert group["metadata"]["annotations"][DESIRED_ANNOTATION] == "2"
    rollout.step(list(api.groups.values()))
    assert set(api.deployments) == {NEW} and _status(client, NEW) == "running"


def test_a_job_still_running_at_the_drain_timeout_is_requeued_on_a_new_worker(dask: tuple[Any, Any]) -> None:
    cluster, client = dask
    old_template, new_template = _template("worker@sha256:1", "t1"), _template("worker@sha256:1", "t2")
    api = FakeKubernetes([_group(GROUP, 1, new_template)], [_deployment(OLD, GROUP, old_template)])
    _start_worker(cluster, OLD)
    # Only the old worker exists: the job starts there and holds there until the test opens its gate.
    stuck = client.submit(_job, _gate("stuck"), OLD, resources={contract.DASK_GPU_RESOURCE: 1}, pure=False)
    _wait_running(client, stuck)
    clock = Clock()
    rollout = _rollout(api, client, clock)
    rollout.step(list(api.groups.values()))
    assert _status(client, OLD) == "closing_gracefully"
    api.deployments[NEW] = _deployment(NEW, GROUP, new_template)  # the operator's replacement, once scaled back
    _start_worker(cluster, NEW)

    clock.now = rollout._drain_timeout_s - 1
    rollout.step(list(api.groups.values()))
    assert OLD in api.deployments
    clock.now = rollout._drain_timeout_s
    rollout.step(list(api.groups.values()))
    assert OLD not in api.deployments and _status(client, OLD) is None
    assert stuck.result(timeout=GATE_WAIT_S) == NEW  # run again on the new worker: requeued, not lost


def test_the_cpu_worker_is_replaced_by_a_new_one_before_it_drains(dask: tuple[Any, Any]) -> None:
    """The always-up CPU worker runs the post-deploy probe: its replacement runs before it stops taking jobs."""
    cluster, client = dask
    cpu, resource = "gpu-dask-cpu", contract.DASK_CPU_RESOURCE
    old_name, new_name = f"{cpu}-worker-0000000old", f"{cpu}-worker-0000000new"
    old, new = _template("worker@sha256:1", "c1", gpus=0), _template("worker@sha256:2", "c1", gpus=0)
    api = FakeKubernetes([_group(cpu, 1, new)], [_deployment(old_name, cpu, old)])
    _start_worker(cluster, old_name, resource)
    rollout = _rollout(api, client)

    rollout.step(list(api.groups.values()))
    group = api.groups[cpu]
    assert group["spec"]["worker"]["replicas"] == 2 and _status(client, old_name) == "running"
    rollout.step(list(api.groups.values()))  # the new worker is not up yet: the old one keeps serving
    probe = client.submit(_job, _gate("probe"), resources={resource: 1}, pure=False)
    GATES["probe"].set()
    assert probe.result(timeout=GATE_WAIT_S) == old_name

    api.deployments[new_name] = _deployment(new_name, cpu, new)  # what the operator makes for replica 2
    _start_worker(cluster, new_name, resource)
    rollout.step(list(api.groups.values()))
    assert _status(client, old_name) == "closing_gracefully"
    rollout.step(list(api.groups.values()))
    assert set(api.deployments) == {new_name} and _status(client, old_name) is None
    group = api.groups[cpu]
    assert group["spec"]["worker"]["replicas"] == 1
    assert group["metadata"]["annotations"][DESIRED_ANNOTATION] == "1"
    assert SURGE_ANNOTATION not in group["metadata"]["annotations"]


class Busy:
    """Dask workers that are all running a job, and record which were asked to close."""

    def __init__(self, names: list[str]) -> None:
        self.workers_by_name = {n: DaskWorker(f"tcp://10.0.0.{i}:1", n, "running", 1) for i, n in enumerate(names)}
        self.closed: list[str] = []

    def workers(self) -> list[DaskWorker]:
        return list(self.workers_by_name.values())

    def close_gracefully(self, addresses: list[str]) -> None:
        self.closed += addresses
        for name, worker in self.workers_by_name.items():
            if worker.address in addresses:
                self.workers_by_name[name] = DaskWorker(worker.address, name, "closing_gracefully", 1)

    def retire(self, addresses: list[str]) -> None:
        raise AssertionError("nothing is idle")


@pytest.mark.parametrize(
    ("old", "closed"),
    [
        # Same code, another template (resources, settings): a quarter at a time keeps the pool's capacity.
        (_template("worker@sha256:2", "t0"), 2),
        # Another image is another commit's code, which new jobs may not find: every such worker closes at once.
        (_template("worker@sha256:1", "t1"), 8),
    ],
)
def test_a_new_template_drains_a_quarter_at_once_a_new_image_all(old: dict[str, Any], closed: int) -> None:
    names = [f"{GROUP}-worker-{i:010d}" for i in range(8)]
    api = FakeKubernetes(
        [_group(GROUP, 8, _template("worker@sha256:2", "t1"))], [_deployment(n, GROUP, old) for n in names]
    )
    dask = Busy(names)
    rollout = WorkerRollout(api, dask, "gpu-dask", "compute", pool_of=lambda g: "t4")
    rollout.step(list(api.groups.values()))
    rollout.step(list(api.groups.values()))
    assert len(dask.closed) == closed and len(api.deployments) == 8


def test_the_default_group_takes_the_clusters_worker_template_and_keeps_its_own_annotations() -> None:
    wanted = _template("worker@sha256:2", "t2")
    current = _template("worker@sha256:1", "t1")
    current["spec"]["nodeSelector"] = {"gone": "true"}
    current["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/consume-provisioning-request"] = "pr-1"
    default = _group("gpu-dask-default", 0, current)
    cluster = {"metadata": {"name": "gpu-dask"}, "spec": {"worker": {"replicas": 0, **wanted}}}
    api = FakeKubernetes([default], [], clusters=[cluster])

    class NoWorkers:
        def workers(self) -> list[DaskWorker]:
            return []

    WorkerRollout(api, NoWorkers(), "gpu-dask", "compute", pool_of=lambda g: "a100").step(list(api.groups.values()))  # type: ignore[arg-type]
    worker = api.groups["gpu-dask-default"]["spec"]["worker"]
    assert worker["spec"] == wanted["spec"]  # the removed nodeSelector is gone too
    assert worker["metadata"]["annotations"] == {
        contract.DASK_WORKER_TEMPLATE_ANNOTATION: "t2",
        "cluster-autoscaler.kubernetes.io/consume-provisioning-request": "pr-1",
    }
    assert worker["replicas"] == 0


def test_queued_pools_are_left_alone() -> None:
    old, new = _template("worker@sha256:1", "t1"), _template("worker@sha256:2", "t1")
    api = FakeKubernetes([_group(GROUP, 1, new)], [_deployment(OLD, GROUP, old)])

    class Untouchable:
        def workers(self) -> list[DaskWorker]:
            return [DaskWorker("tcp://10.0.0.1:1", OLD, "running", 0)]

        def close_gracefully(self, addresses: list[str]) -> None:
            raise AssertionError("a queued pool's worker stands on capacity granted for it")

    WorkerRollout(
        api,
        Untouchable(),
        "gpu-dask",
        "compute",
        pool_of=lambda g: "t4",  # type: ignore[arg-type]
        skip={"t4"},
    ).step(list(api.groups.values()))
    assert OLD in api.deployments


def test_merge_replacing_removes_what_the_new_value_lacks() -> None:
    assert merge_replacing({"a": 1, "b": {"c": 1, "d": 2}, "e": [1]}, {"b": {"c": 3}, "e": [2]}) == {
        "a": None,
        "b": {"d": None, "c": 3},
        "e": [2],
    }


def test_kubernetes_pools_roll_in_their_reconcile_only_with_dask(dask: tuple[Any, Any]) -> None:
    cluster, client = dask
    old, new = _template("worker@sha256:1", "t1"), _template("worker@sha256:2", "t1")
    api = FakeKubernetes([_group(GROUP, 1, new)], [_deployment(OLD, GROUP, old)])
    _start_worker(cluster, OLD)
    KubernetesPools(api).reconcile()  # type: ignore[arg-type]
    assert _status(client, OLD) == "running"
    KubernetesPools(api, dask=ClientWorkers(client)).reconcile()  # type: ignore[arg-type]
    # Idle: it drains at once and leaves in the next round.
    assert _status(client, OLD) == "closing_gracefully"


def test_a_failing_roll_leaves_the_pools_reconcile_standing() -> None:
    """The Dask scheduler away for a moment: the recorded size is still put back, and the next round rolls."""
    old, new = _template("worker@sha256:1", "t1"), _template("worker@sha256:2", "t1")
    group = _group(GROUP, 1, new)
    group["metadata"]["annotations"] = {DESIRED_ANNOTATION: "3"}
    api = FakeKubernetes([group], [_deployment(OLD, GROUP, old)])

    class Away:
        def workers(self) -> list[DaskWorker]:
            raise OSError("Timed out trying to connect to tcp://gpu-dask-scheduler.compute:8786")

    KubernetesPools(api, dask=Away()).reconcile()  # type: ignore[arg-type]
    assert api.groups[GROUP]["spec"]["worker"]["replicas"] == 3 and OLD in api.deployments
