"""Pools in the cloud: each pool is a DaskWorkerGroup of the Dask operator, named by its pool label.

Scaling patches ``spec.worker.replicas`` through the Kubernetes API (a ``KubernetesApi``, passed in).
The desired size is also written to an annotation, so a stopped pool stays stopped and a new leader
rehydrates every pool's size from the cluster itself after a restart.

The primary pool is the operator's ``<cluster>-default`` group, which a DaskAutoscaler also sizes. An
operator's scale or stop there pins the autoscaler's bounds to the same size too; otherwise the
autoscaler and the reconciler would overwrite each other's replicas forever.

A queued pool (``queued``: GKE queued provisioning) gets its workers only on capacity GKE grants to a
ProvisioningRequest: ``KubernetesPools`` hands such pools to a ``QueuedProvisioner``
(``runtime.scheduler.pools.queued``), which records their size, asks for capacity and adds their workers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from runtime.manifests import dask_operator
from runtime.manifests.worker_group import (
    DESIRED_ANNOTATION,
    desired_of,
    gpus_per_worker,
    max_workers_of,
    pool_of,
    replicas_of,
)
from runtime.protocol import contract
from runtime.scheduler.pools.base import PoolError, PoolInfo, PoolNotFound, check_workers, pool_status
from runtime.scheduler.pools.kubernetes_api import KubernetesApi
from runtime.scheduler.pools.queued import QueuedProvisioner, request_token
from runtime.scheduler.pools.rollout import DaskWorkers, WorkerRollout

log = logging.getLogger(__name__)

DEFAULT_GROUP_SUFFIX: Final = "-default"  # the group the operator makes from the DaskCluster's own worker spec


class KubernetesPools:
    """Worker groups of the DaskCluster ``cluster`` in ``namespace``.

    ``queued`` maps each queued pool to its requests' maxRunDurationSeconds (None: GKE's default);
    ``is_leader`` says whether this replica may create and delete ProvisioningRequests; with ``dask``, the
    reconcile also rolls running workers onto their group's current template (``runtime.scheduler.pools.rollout``).
    """

    def __init__(self, api: KubernetesApi, cluster: str = contract.DASK_CLUSTER_NAME,
                 namespace: str = contract.COMPUTE_NAMESPACE,
                 on_evict: Callable[[str], None] = lambda pool: None,
                 queued: Mapping[str, int | None] | None = None,
                 is_leader: Callable[[], bool] = lambda: True,
                 token: Callable[[], str] = request_token,
                 dask: DaskWorkers | None = None) -> None:
        self._api = api
        self._cluster = cluster
        self._namespace = namespace
        self._on_evict = on_evict
        self._provisioner = QueuedProvisioner(api, cluster, namespace, queued or {}, group=self._group,
                                              patch_group=self._patch_group,
                                              pin_autoscaler=self._pin_if_default, is_leader=is_leader,
                                              token=token)
        self._rollout = None if dask is None else WorkerRollout(api, dask, cluster, namespace,
                                                                pool_of=self._pool_id, skip=self._provisioner.pools)

    def list(self) -> list[PoolInfo]:
        """Every worker group of the cluster, as pools; a queued pool with its ProvisioningRequests."""
        requests = self._provisioner.requests() if self._provisioner.pools else []
        return [self._info(group, requests) for group in self._groups()]

    def scale(self, pool_id: str, workers: int) -> PoolInfo:
        """Patch the group's replicas and desired-size annotation (a queued pool: ``QueuedProvisioner.scale``)."""
        check_workers(workers)
        group = self._group(pool_id)  # a clear "no such pool" before any write
        bound = max_workers_of(group)
        if bound is not None and workers > bound:
            raise PoolError(f"pool {pool_id} may have at most {bound} workers (the stack's daskWorkersMax), "
                            f"not {workers}")
        if pool_id in self._provisioner.pools:
            self._provisioner.scale(pool_id, group, workers)
            return self._info(self._group(pool_id), self._provisioner.requests())
        name = group["metadata"]["name"]
        self._pin_if_default(name, workers)
        return self._info(self._patch(name, workers, record_desired=True))

    def stop(self, pool_id: str) -> PoolInfo:
        """Scale ``pool_id`` to zero and keep it there."""
        info = self.scale(pool_id, 0)
        self._on_evict(pool_id)
        return info

    def stop_all(self) -> list[PoolInfo]:
        """Stop every pool of the cluster."""
        return [self.stop(info.id) for info in self.list()]

    def reconcile(self) -> None:
        """Put back the recorded desired size where replicas drifted (an operator restart, a manual edit); on the
        leader, move each queued pool's requests and workers one step towards its desired size, and roll workers
        onto their group's current template."""
        groups = self._groups()
        for group in groups:
            pool_id = self._pool_id(group)
            if pool_id in self._provisioner.pools:
                self._provisioner.reconcile(pool_id)
                continue
            desired = desired_of(group)
            if desired is not None and replicas_of(group) != desired:
                self._patch(group["metadata"]["name"], desired, record_desired=False)
        self._provisioner.sweep()
        if self._rollout is not None:
            try:
                self._rollout.step(self._groups())  # as the size corrections above left them
            except Exception:  # a Dask or API hiccup: the pools' own state above stands; the next round resumes
                log.exception("rolling workers onto their current template failed; retrying next round")

    def gpu_slots(self) -> int:
        """GPUs the pools want: desired workers times GPUs per worker."""
        return sum(info.desired * max(1, info.gpus_per_worker) for info in map(self._info, self._groups()))

    # --- internals ---------------------------------------------------------------------------------

    def _groups(self) -> list[dict[str, Any]]:
        try:
            listing = self._api.list_namespaced_custom_object(
                dask_operator.GROUP, dask_operator.VERSION, self._namespace, dask_operator.WORKER_GROUP_PLURAL,
                label_selector=f"{dask_operator.CLUSTER_LABEL}={self._cluster}",
            )
        except Exception as exc:
            raise PoolError(f"cannot list Dask worker groups in {self._namespace}: {exc}") from exc
        return sorted(listing.get("items", []), key=lambda item: item["metadata"]["name"])

    def _group(self, pool_id: str) -> dict[str, Any]:
        for group in self._groups():
            if self._pool_id(group) == pool_id:
                return group
        raise PoolNotFound(f"no pool {pool_id!r} (worker group {self._cluster}-{pool_id} or pool label "
                           f"{contract.DASK_POOL_LABEL}={pool_id})")

    def _is_default(self, group_name: str) -> bool:
        return group_name == f"{self._cluster}{DEFAULT_GROUP_SUFFIX}"

    def _pin_if_default(self, group_name: str, workers: int) -> None:
        """Pin the autoscaler to ``workers`` when the group is the one it sizes."""
        if self._is_default(group_name):
            self._pin_autoscaler(workers)

    def _patch(self, group_name: str, replicas: int, *, record_desired: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"spec": {"worker": {"replicas": replicas}}}
        if record_desired:
            body["metadata"] = {"annotations": {DESIRED_ANNOTATION: str(replicas)}}
        return self._patch_group(group_name, body)

    def _patch_group(self, group_name: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._api.patch_namespaced_custom_object(
                dask_operator.GROUP, dask_operator.VERSION, self._namespace, dask_operator.WORKER_GROUP_PLURAL,
                group_name, body,
            )
        except Exception as exc:
            raise PoolError(f"cannot scale worker group {group_name}: {exc}") from exc

    def _pin_autoscaler(self, workers: int) -> None:
        from kubernetes.client.exceptions import ApiException

        name = f"{self._cluster}{contract.DASK_AUTOSCALER_SUFFIX}"
        body = {"spec": {"minimum": workers, "maximum": workers}}
        try:
            self._api.patch_namespaced_custom_object(
                dask_operator.GROUP, dask_operator.VERSION, self._namespace, dask_operator.AUTOSCALER_PLURAL, name, body
            )
        except ApiException as exc:
            if exc.status != 404:  # no autoscaler: nothing else sizes the group
                raise PoolError(f"cannot pin the autoscaler {name}: {exc.reason}") from exc

    def _pool_id(self, group: dict[str, Any]) -> str:
        return pool_of(group, self._cluster)

    def _info(self, group: dict[str, Any], requests: Sequence[dict[str, Any]] | None = None) -> PoolInfo:
        replicas = replicas_of(group)
        desired = desired_of(group)
        desired = replicas if desired is None else desired
        ready = int(group.get("status", {}).get("readyReplicas", group.get("status", {}).get("workers", replicas)))
        pool_id = self._pool_id(group)
        provisioning = None
        if pool_id in self._provisioner.pools and requests is not None:
            provisioning = self._provisioner.info(pool_id, group, requests)
        return PoolInfo(id=pool_id, desired=desired, workers=ready, gpus_per_worker=gpus_per_worker(group),
                        status=pool_status(desired, ready), provisioning=provisioning)
