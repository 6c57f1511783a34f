"""Queued provisioning: a queued pool's workers on capacity granted by GKE ProvisioningRequests.

A queued pool (``queued``: GKE queued provisioning) gets nodes only for a ProvisioningRequest, so its workers
are never added on spec: scaling it up records the desired size, and the leader (in ``scale`` when it serves
the call, else within a reconcile round) asks GKE for the missing workers' capacity with a PodTemplate and a
ProvisioningRequest, watches the request's conditions every round, and adds the workers, carrying the
request's consume annotations, once it is ``Provisioned``. A ``Failed`` request is deleted and reported, and
stops further requests until the pool is scaled again; one whose capacity was revoked takes its workers with
it and is asked for again; requests nobody needs any more are deleted. See docs/scheduler.md ("Queued pools").

``KubernetesPools`` (``runtime.scheduler.pools.kubernetes``) holds a ``QueuedProvisioner`` and hands it its
queued pools; the provisioner calls Kubernetes through the same ``KubernetesApi`` and reads and patches the
worker groups through the pools' own ``group``, ``patch_group`` and ``pin_autoscaler``.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from runtime.manifests import dask_operator
from runtime.manifests import provisioning as prov
from runtime.manifests.worker_group import DESIRED_ANNOTATION, annotations_of, desired_of, replicas_of
from runtime.protocol import contract
from runtime.scheduler.pools.base import PoolError, ProvisioningInfo, ProvisioningRequestInfo
from runtime.scheduler.pools.kubernetes_api import KubernetesApi

# On a queued pool's worker group: the requests whose workers were added (comma-separated, oldest first), and
# the last request GKE failed, which holds off new requests until the pool is scaled again.
CONSUMED_ANNOTATION: Final = "gpu-runtime.dev/provisioning-consumed"
FAILURE_ANNOTATION: Final = "gpu-runtime.dev/provisioning-failure"

# A request's state, from its conditions (the first that is True wins, in this order).
PENDING: Final = "pending"
ACCEPTED: Final = "accepted"
PROVISIONED: Final = "provisioned"
BOOKING_EXPIRED: Final = "booking-expired"
CAPACITY_REVOKED: Final = "capacity-revoked"
FAILED: Final = "failed"
_STATES: Final = ((prov.FAILED, FAILED), (prov.CAPACITY_REVOKED, CAPACITY_REVOKED),
                  (prov.BOOKING_EXPIRED, BOOKING_EXPIRED), (prov.PROVISIONED, PROVISIONED), (prov.ACCEPTED, ACCEPTED))

log = logging.getLogger(__name__)


def request_token() -> str:
    """A fresh suffix for a request's name (``pr-`` and 10 hex digits): unique enough within one pool."""
    return f"pr-{secrets.token_hex(5)}"


class QueuedProvisioner:
    """The ProvisioningRequests of the DaskCluster ``cluster``'s queued pools in ``namespace``.

    ``pools`` maps each queued pool to its requests' maxRunDurationSeconds (None: GKE's default);
    ``is_leader`` says whether this replica may create and delete ProvisioningRequests. ``group`` finds a
    pool's worker group, ``patch_group`` merge-patches a group by name, and ``pin_autoscaler`` pins the
    autoscaler to a group's new size where the group is the one it sizes.
    """

    def __init__(self, api: KubernetesApi, cluster: str, namespace: str, pools: Mapping[str, int | None], *,
                 group: Callable[[str], dict[str, Any]],
                 patch_group: Callable[[str, dict[str, Any]], dict[str, Any]],
                 pin_autoscaler: Callable[[str, int], None],
                 is_leader: Callable[[], bool] = lambda: True,
                 token: Callable[[], str] = request_token) -> None:
        self._api = api
        self._cluster = cluster
        self._namespace = namespace
        self._pools = dict(pools)
        self._group = group
        self._patch_group = patch_group
        self._pin_autoscaler = pin_autoscaler
        self._is_leader = is_leader
        self._token = token
        # The API thread (a scale served by the leader) and the singleton loop both provision: one at a time,
        # so neither acts on requests or replicas the other is changing.
        self._lock = threading.Lock()

    @property
    def pools(self) -> Mapping[str, int | None]:
        """The queued pools, each with its requests' maxRunDurationSeconds."""
        return self._pools

    def requests(self) -> list[dict[str, Any]]:
        """Every ProvisioningRequest of the cluster (all its queued pools)."""
        try:
            listing = self._api.list_namespaced_custom_object(
                prov.GROUP, prov.VERSION, self._namespace, prov.PLURAL,
                label_selector=f"{prov.CLUSTER_LABEL}={self._cluster}",
            )
        except Exception as exc:
            raise PoolError(f"cannot list ProvisioningRequests in {self._namespace}: {exc}") from exc
        return list(listing.get("items", []))

    def info(self, pool_id: str, group: dict[str, Any], requests: Sequence[dict[str, Any]]) -> ProvisioningInfo:
        """The pool's requests (of ``requests``, every request of the cluster), oldest first, and its last failure."""
        consumed = _consumed(group)
        return ProvisioningInfo(
            requests=[_request_info(r, consumed) for r in sorted(requests, key=_age) if _pool_of(r) == pool_id],
            failure=annotations_of(group).get(FAILURE_ANNOTATION),
            max_run_duration_s=self._pools[pool_id],
        )

    def reconcile(self, pool_id: str) -> None:
        """On the leader, move the pool's requests and workers one step towards its desired size."""
        if self._is_leader():
            self._provision_pool(pool_id)

    def sweep(self) -> None:
        """On the leader, with queued pools, delete the PodTemplates left without their request."""
        if self._pools and self._is_leader():
            self._sweep_templates()

    def scale(self, pool_id: str, group: dict[str, Any], workers: int) -> None:
        """Record the desired size; workers go at once when fewer are wanted, and come only on granted capacity.

        Any replica records; only the leader then provisions (here, or in its next reconcile round). A new
        size also clears the last failure: scaling again is how an operator asks GKE once more.
        """
        with self._lock:
            name = group["metadata"]["name"]
            body: dict[str, Any] = {"metadata": {"annotations": {DESIRED_ANNOTATION: str(workers),
                                                                  FAILURE_ANNOTATION: None}}}
            fewer = workers < replicas_of(group)
            if fewer:
                body["spec"] = {"worker": {"replicas": workers}}
            self._patch_group(name, body)
            if fewer:
                self._pin_autoscaler(name, workers)
        if self._is_leader():
            self._provision_pool(pool_id)

    # --- internals ---------------------------------------------------------------------------------

    def _provision_pool(self, pool_id: str) -> None:
        with self._lock:
            group = self._group(pool_id)  # read under the lock: a concurrent scale may just have changed it
            requests = [r for r in self.requests() if _pool_of(r) == pool_id]
            self._provision(pool_id, group, requests)

    def _provision(self, pool_id: str, group: dict[str, Any], requests: list[dict[str, Any]]) -> None:
        """One step of a queued pool towards its desired size (leader only, under the lock).

        Ended requests go (a revoked one with the workers on its capacity); at most one Provisioned request's
        workers are added per round, and only once the operator has made every worker asked for before, so
        each new worker carries the consume annotations of the request it was added for; outstanding
        requests beyond what the pool still wants are cancelled; a request for the rest is made unless the
        last one failed; requests whose workers have all retired are deleted.
        """
        name = group["metadata"]["name"]
        replicas = replicas_of(group)
        desired = desired_of(group)
        desired = replicas if desired is None else desired
        failure = annotations_of(group).get(FAILURE_ANNOTATION)
        existing = {_name(r) for r in requests}
        consumed = [n for n in _consumed(group) if n in existing]  # forget records of deleted requests
        workers = self._workers(name)
        caught_up = len(workers) == replicas  # the operator has made (or retired) the workers asked for
        outstanding: list[dict[str, Any]] = []
        for request in sorted(requests, key=_age):
            request_name, (state, reason, message) = _name(request), _state(request)
            if state in (FAILED, CAPACITY_REVOKED):
                if request_name in consumed:
                    removed = self._remove_workers(workers, request_name)
                    replicas -= removed
                    consumed.remove(request_name)
                    caught_up = False  # replicas change below; add new workers only in a later round
                if state == FAILED:
                    failure = f"{request_name}: {reason or 'Failed'}: {message}".rstrip(": ")
                log.warning("ProvisioningRequest %s of pool %s: %s (%s: %s)", request_name, pool_id, state, reason,
                            message)
                self._delete_request(request_name)
            elif request_name in consumed:
                continue  # its workers run on its capacity; deleted below once they have all retired
            elif state == BOOKING_EXPIRED:
                # Provisioned, but its workers were not added within GKE's booking time: that capacity is gone,
                # not refused, so the pool asks again below.
                log.warning("ProvisioningRequest %s of pool %s expired before its workers were added",
                            request_name, pool_id)
                self._delete_request(request_name)
            else:
                outstanding.append(request)

        replicas = min(replicas, desired)
        wanted = max(0, desired - replicas)
        # Provisioned requests first (their capacity is waiting), then the queued ones, each oldest first.
        outstanding.sort(key=lambda r: _state(r)[0] != PROVISIONED)
        add: tuple[str, int] | None = None
        covered = 0
        for request in outstanding:
            request_name, count, state = _name(request), _count(request), _state(request)[0]
            if covered >= wanted or (state != PROVISIONED and covered + count > wanted):
                # Nobody needs it any more, or it asks for more than is still wanted (a smaller one follows).
                self._delete_request(request_name)
            elif state == PROVISIONED and add is None and caught_up:
                add = (request_name, min(count, wanted - covered))
                covered += add[1]
            else:
                covered += count
        if add is not None:
            replicas += add[1]
            consumed.append(add[0])
        if caught_up and consumed and replicas < sum(_count(r) for r in requests if _name(r) in consumed):
            # Fewer workers than the capacity consumed: delete the requests none of whose workers remain. Only
            # once the operator has caught up: a worker it has yet to create must not pass for a retired one.
            remaining = _consumers(workers)
            for request_name in [n for n in consumed if n != (add and add[0]) and not remaining.get(n)]:
                self._delete_request(request_name)
                consumed.remove(request_name)
        # The group first: what this round removed, added or learnt is recorded even if asking GKE fails.
        self._update_group(group, replicas, consumed, failure, add)
        if covered < wanted and failure is None:
            self._request_capacity(pool_id, group, wanted - covered)

    def _update_group(self, group: dict[str, Any], replicas: int, consumed: list[str], failure: str | None,
                      add: tuple[str, int] | None) -> None:
        """One patch of the worker group: replicas, and with new workers the consume annotations they get."""
        name = group["metadata"]["name"]
        annotations = annotations_of(group)
        meta: dict[str, str | None] = {}
        if ",".join(consumed) != (annotations.get(CONSUMED_ANNOTATION) or ""):
            meta[CONSUMED_ANNOTATION] = ",".join(consumed) or None
        if failure != annotations.get(FAILURE_ANNOTATION):
            meta[FAILURE_ANNOTATION] = failure
        worker: dict[str, Any] = {}
        if replicas != replicas_of(group):
            worker["replicas"] = replicas
        if add is not None:
            # The operator copies these onto each worker it creates for the new replicas (same patch, so the
            # same event), and later workers get the next request's: each worker keeps the request it came for.
            worker["metadata"] = {"annotations": prov.consume_annotations(add[0])}
        body: dict[str, Any] = {}
        if meta:
            body["metadata"] = {"annotations": meta}
        if worker:
            body["spec"] = {"worker": worker}
        if body:
            self._patch_group(name, body)
        if "replicas" in worker:
            # After the group: the autoscaler must never add unannotated workers.
            self._pin_autoscaler(name, replicas)

    def _request_capacity(self, pool_id: str, group: dict[str, Any], workers: int) -> None:
        """Create a PodTemplate of the group's workers and a ProvisioningRequest for ``workers`` of them."""
        name = prov.request_name(group["metadata"]["name"], self._token())
        template, request = prov.build_provisioning(group, pool_id, self._cluster, name, workers,
                                                    self._pools.get(pool_id), self._namespace)
        try:
            self._api.create_namespaced_pod_template(self._namespace, template)
            self._api.create_namespaced_custom_object(prov.GROUP, prov.VERSION, self._namespace, prov.PLURAL,
                                                      request)
        except Exception as exc:
            self._delete_template(name)
            raise PoolError(f"cannot request capacity for {workers} worker(s) of pool {pool_id}: {exc}") from exc
        log.info("ProvisioningRequest %s asks for %d worker(s) of pool %s", name, workers, pool_id)

    def _delete_request(self, name: str) -> None:
        """Delete a request and its PodTemplate; either being gone already is fine."""
        from kubernetes.client.exceptions import ApiException

        try:
            self._api.delete_namespaced_custom_object(prov.GROUP, prov.VERSION, self._namespace, prov.PLURAL, name)
        except ApiException as exc:
            if exc.status != 404:
                raise PoolError(f"cannot delete ProvisioningRequest {name}: {exc.reason}") from exc
        self._delete_template(name)

    def _delete_template(self, name: str) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self._api.delete_namespaced_pod_template(name, self._namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise PoolError(f"cannot delete PodTemplate {name}: {exc.reason}") from exc

    def _sweep_templates(self) -> None:
        """Delete PodTemplates whose request is gone (a leader that stopped between the two deletes)."""
        with self._lock:
            requests = {_name(r) for r in self.requests()}
            try:
                listing = self._api.list_namespaced_pod_template(
                    self._namespace, label_selector=f"{prov.CLUSTER_LABEL}={self._cluster}")
            except Exception as exc:
                raise PoolError(f"cannot list PodTemplates in {self._namespace}: {exc}") from exc
            for template in listing.get("items", []):
                if _name(template) not in requests:
                    self._delete_template(_name(template))

    def _workers(self, group_name: str) -> list[dict[str, Any]]:
        """The worker Deployments the operator made for the group, without those being deleted."""
        try:
            listing = self._api.list_namespaced_deployment(
                self._namespace, label_selector=f"{dask_operator.WORKER_GROUP_LABEL}={group_name}")
        except Exception as exc:
            raise PoolError(f"cannot list the workers of {group_name}: {exc}") from exc
        return [d for d in listing.get("items", []) if not (d.get("metadata") or {}).get("deletionTimestamp")]

    def _remove_workers(self, workers: list[dict[str, Any]], request: str) -> int:
        """Delete the workers that consume ``request``: its capacity is gone, so their pods could never be placed
        again. Returns how many there were."""
        from kubernetes.client.exceptions import ApiException

        mine = [w for w in workers if _consumes(w) == request]
        for worker in mine:
            try:
                self._api.delete_namespaced_deployment(_name(worker), self._namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise PoolError(f"cannot remove worker {_name(worker)}: {exc.reason}") from exc
        return len(mine)


def _consumed(group: dict[str, Any]) -> list[str]:
    return [n for n in (annotations_of(group).get(CONSUMED_ANNOTATION) or "").split(",") if n]


def _name(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def _pool_of(request: dict[str, Any]) -> str | None:
    return ((request.get("metadata") or {}).get("labels") or {}).get(contract.DASK_POOL_LABEL)


def _age(request: dict[str, Any]) -> tuple[str, str]:
    # RFC 3339 timestamps in UTC sort as strings; the name breaks ties within a second.
    return str((request.get("metadata") or {}).get("creationTimestamp") or ""), _name(request)


def _count(request: dict[str, Any]) -> int:
    return sum(int(s.get("count", 0)) for s in (request.get("spec") or {}).get("podSets") or [])


def _conditions(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(c.get("type")): c for c in (request.get("status") or {}).get("conditions") or []}


def _state(request: dict[str, Any]) -> tuple[str, str, str]:
    """(state, reason, message): the first True condition of Failed, CapacityRevoked, BookingExpired,
    Provisioned, Accepted; while waiting, the reason GKE gives for not provisioning yet (QuotaExceeded...)."""
    conditions = _conditions(request)
    for condition_type, state in _STATES:
        condition = conditions.get(condition_type)
        if condition is not None and condition.get("status") == "True":
            if state == ACCEPTED and prov.PROVISIONED in conditions:
                condition = conditions[prov.PROVISIONED]  # e.g. Provisioned=False, QuotaExceeded
            return state, str(condition.get("reason") or ""), str(condition.get("message") or "")
    waiting = conditions.get(prov.PROVISIONED) or conditions.get(prov.ACCEPTED) or {}
    return PENDING, str(waiting.get("reason") or ""), str(waiting.get("message") or "")


def _request_info(request: dict[str, Any], consumed: list[str]) -> ProvisioningRequestInfo:
    state, reason, message = _state(request)
    return ProvisioningRequestInfo(
        name=_name(request), workers=_count(request), state=state, consumed=_name(request) in consumed,
        reason=reason, message=message,
        conditions={t: str(c.get("status")) for t, c in _conditions(request).items() if t in prov.CONDITIONS},
    )


def _consumes(worker: dict[str, Any]) -> str | None:
    template = (worker.get("spec") or {}).get("template") or {}
    return ((template.get("metadata") or {}).get("annotations") or {}).get(prov.CONSUME_ANNOTATION)


def _consumers(workers: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for worker in workers:
        if (request := _consumes(worker)) is not None:
            counts[request] = counts.get(request, 0) + 1
    return counts
