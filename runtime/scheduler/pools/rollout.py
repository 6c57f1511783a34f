"""Rolling each worker group's running workers onto its current template, each once its jobs are done.

The dask-kubernetes operator reads a group's worker template only when it adds a worker: a deploy that changes
the image updates the template in place (components/dask.py) and the running workers keep the old one. Every
leader round (``KubernetesPools.reconcile``) the ``WorkerRollout``:

1. copies the DaskCluster's worker template onto the operator's ``<cluster>-default`` group, which the operator
   made once from it and never updates;
2. finds each group's stale workers: Deployments whose template digest (``DASK_WORKER_TEMPLATE_ANNOTATION``) or
   images differ from the group's template (the Dask worker is named like its Deployment);
3. asks Dask to close stale workers gracefully: they take no new job, their running jobs finish and their
   results stay reachable (``Scheduler.retire_workers`` with neither close nor remove). A worker of another
   image closes at once: it runs another commit's code, which the gpu-scheduler's new jobs may not find there
   (docs/runbooks/drain-upgrade.md), so new jobs wait for new workers instead. A worker whose image is current
   but whose template changed (resources, settings) runs the same code: up to ``ROLL_SHARE`` of the group close
   at a time;
   A group whose workers hold no GPU (the always-up CPU worker) is surged instead: its replicas grow by its stale
   workers first (``SURGE_ANNOTATION`` records by how many), and an old worker closes only once a new one runs,
   so the jobs it serves (the post-deploy probe) never wait; such a worker costs no GPU quota;
4. retires each draining worker once it has no job left (or after ``drain_timeout_s``: a job still there is
   requeued on another worker, not lost), deletes its Deployment and lowers the group's replicas by as many.
   The group's desired size (the reconcile's) or the autoscaler brings them back, and the operator adds the
   new workers from the current template.

Queued pools are left alone: their workers stand on capacity a ProvisioningRequest granted for them, which a
new worker could not use; their next workers get the new template. See docs/scheduler.md ("Rolling workers").
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from runtime.manifests import dask_operator
from runtime.manifests.worker_group import (
    DESIRED_ANNOTATION,
    annotations_of,
    desired_of,
    gpus_per_worker,
    replicas_of,
)
from runtime.protocol import contract
from runtime.scheduler.pools.base import PoolError
from runtime.scheduler.pools.kubernetes_api import KubernetesApi

# Share of a group's workers of the current image that drain at once for a new template, at least one: the pool
# keeps three quarters of its capacity while it rolls (Kubernetes' own default maxUnavailable for a rolling
# update), and no surge needs spare GPU quota.
ROLL_SHARE: Final = 0.25
# A draining worker whose job is still running this long after the drain began is retired anyway (the job runs
# again on another worker): a roll always ends. Two hours covers the platform's jobs (minutes) many times over.
DRAIN_TIMEOUT_S: Final = 2 * 3600.0
RUNNING: Final = "running"
# On a surged group: how many workers it has beyond its size until its old ones have left.
SURGE_ANNOTATION: Final = "gpu-runtime.dev/roll-surge"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DaskWorker:
    """One worker as the Dask scheduler sees it."""

    address: str
    name: str
    status: str
    """Dask's worker status: ``running``, ``closing_gracefully`` (draining), ``paused``..."""
    jobs: int
    """Tasks the scheduler has given it that have not finished."""


class DaskWorkers(Protocol):
    """The Dask scheduler's workers, and the two ways a worker leaves."""

    def workers(self) -> list[DaskWorker]:
        """Every worker the scheduler knows."""
        ...

    def close_gracefully(self, addresses: Sequence[str]) -> None:
        """Give the workers no new task; their running tasks finish."""
        ...

    def retire(self, addresses: Sequence[str]) -> None:
        """Move the workers' data elsewhere and remove them; a task still running on one runs again elsewhere."""
        ...


class ClientWorkers:
    """``DaskWorkers`` over a ``distributed.Client``."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def workers(self) -> list[DaskWorker]:
        """See ``DaskWorkers``."""
        info = self._client.scheduler_info(n_workers=-1)["workers"]
        processing = self._client.processing()
        return [
            DaskWorker(address, str(w.get("name", "")), str(w.get("status", RUNNING)), len(processing.get(address, ())))
            for address, w in info.items()
        ]

    def close_gracefully(self, addresses: Sequence[str]) -> None:
        """See ``DaskWorkers``: the scheduler flushes their data and leaves them ``closing_gracefully``."""
        self._client.retire_workers(workers=list(addresses), close_workers=False, remove=False)

    def retire(self, addresses: Sequence[str]) -> None:
        """See ``DaskWorkers``."""
        self._client.retire_workers(workers=list(addresses), close_workers=True)


def images_of(pod_spec: dict[str, Any]) -> list[str]:
    return [str(c.get("image", "")) for c in pod_spec.get("containers") or []]


def _template(group: dict[str, Any]) -> tuple[str | None, list[str]]:
    worker = group.get("spec", {}).get("worker", {})
    return (annotations_of(worker).get(contract.DASK_WORKER_TEMPLATE_ANNOTATION), images_of(worker.get("spec", {})))


def _deployment_template(deployment: dict[str, Any]) -> tuple[str | None, list[str]]:
    template = (deployment.get("spec") or {}).get("template") or {}
    return (
        annotations_of(template).get(contract.DASK_WORKER_TEMPLATE_ANNOTATION),
        images_of(template.get("spec") or {}),
    )


def _surge_of(group: dict[str, Any]) -> int:
    value = annotations_of(group).get(SURGE_ANNOTATION)
    return int(value) if value is not None and str(value).isdigit() else 0


def merge_replacing(old: Any, new: Any) -> Any:
    """A JSON merge patch that turns ``old`` into ``new``: keys ``new`` lacks are set to null (removed)."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return new
    return {
        **{key: None for key in old if key not in new},
        **{key: merge_replacing(old.get(key), value) for key, value in new.items()},
    }


class _GroupChangedMeanwhile(PoolError):
    """A worker-group patch whose ``resourceVersion`` another writer (a scale) overtook."""


class WorkerRollout:
    """Rolls the workers of the DaskCluster ``cluster``'s groups in ``namespace`` (leader only).

    ``skip`` names the pools left alone (queued pools); ``pool_of`` tells a group's pool; ``clock`` is
    monotonic seconds.
    """

    def __init__(
        self,
        api: KubernetesApi,
        dask: DaskWorkers,
        cluster: str,
        namespace: str,
        *,
        pool_of: Callable[[dict[str, Any]], str],
        skip: Collection[str] = (),
        drain_timeout_s: float = DRAIN_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api
        self._dask = dask
        self._cluster = cluster
        self._namespace = namespace
        self._pool_of = pool_of
        self._skip = frozenset(skip)
        self._drain_timeout_s = drain_timeout_s
        self._clock = clock
        # When this leader began draining each worker (by name): a new leader starts the clock again, which only
        # lengthens a drain.
        self._draining_since: dict[str, float] = {}

    @property
    def default_group(self) -> str:
        return f"{self._cluster}-default"

    def step(self, groups: Sequence[dict[str, Any]]) -> None:
        """One round over ``groups`` (the cluster's DaskWorkerGroups as listed)."""
        dask = {w.name: w for w in self._dask.workers()}
        rolling: set[str] = set()
        for group in groups:
            if self._pool_of(group) in self._skip:
                continue
            if group["metadata"]["name"] == self.default_group:
                group = self._sync_default(group)
            rolling |= self._step_group(group, dask)
        # Forget workers that are gone (retired here, or lost).
        self._draining_since = {n: t for n, t in self._draining_since.items() if n in rolling}

    # --- internals ---------------------------------------------------------------------------------

    def _sync_default(self, group: dict[str, Any]) -> dict[str, Any]:
        """Copy the DaskCluster's worker template onto the operator's default group where they differ."""
        try:
            listing = self._api.list_namespaced_custom_object(
                dask_operator.GROUP, dask_operator.VERSION, self._namespace, dask_operator.CLUSTER_PLURAL
            )
        except Exception as exc:
            raise PoolError(f"cannot read the DaskCluster {self._cluster}: {exc}") from exc
        clusters = [c for c in listing.get("items", []) if c["metadata"]["name"] == self._cluster]
        if not clusters:
            return group
        wanted = clusters[0].get("spec", {}).get("worker", {})
        current = group.get("spec", {}).get("worker", {})
        wanted_meta, current_meta = wanted.get("metadata") or {}, current.get("metadata") or {}
        meta_patch: dict[str, Any] = {}
        for key in ("labels", "annotations"):
            # Only the template's own keys: queued pools add their consume annotations to the group's template.
            have = current_meta.get(key) or {}
            changed = {k: v for k, v in (wanted_meta.get(key) or {}).items() if have.get(k) != v}
            if changed:
                meta_patch[key] = changed
        if wanted.get("spec") == current.get("spec") and not meta_patch:
            return group
        worker: dict[str, Any] = {"spec": merge_replacing(current.get("spec") or {}, wanted.get("spec") or {})}
        if meta_patch:
            worker["metadata"] = meta_patch
        log.info("worker group %s takes the DaskCluster's worker template", self.default_group)
        return self._patch(self.default_group, {"spec": {"worker": worker}})

    def _step_group(self, group: dict[str, Any], dask: dict[str, DaskWorker]) -> set[str]:
        """Drain and retire the group's stale workers; returns the names of those still rolling."""
        name = group["metadata"]["name"]
        current = _template(group)
        deployments = self._deployments(name)
        stale = [d for d in deployments if _deployment_template(d) != current]
        if not stale:
            return set()
        stale_names = sorted(d["metadata"]["name"] for d in stale)
        surged = _surge_of(group)
        surging = gpus_per_worker(group) == 0 and name != self.default_group  # the autoscaler sizes that one
        if surging and not surged:
            self._surge(group, len(stale_names))
            return set(stale_names)
        now = self._clock()
        done: list[str] = []
        draining = []
        for worker_name in stale_names:
            worker = dask.get(worker_name)
            if worker is not None and worker.status == RUNNING:
                continue  # not asked yet
            since = self._draining_since.setdefault(worker_name, now)
            if worker is None or worker.jobs == 0 or now - since >= self._drain_timeout_s:
                done.append(worker_name)  # nothing left to wait for (a worker not in Dask runs no job)
            else:
                draining.append(worker_name)
        waiting = [n for n in stale_names if n not in done and n not in draining]
        if surged:
            # One old worker closes for each new one running.
            fresh = [d["metadata"]["name"] for d in deployments if d not in stale]
            running = sum(1 for n in fresh if n in dask and dask[n].status == RUNNING)
            start = waiting[: max(0, running - len(draining) - len(done))]
        else:
            other_image = {d["metadata"]["name"] for d in stale if _deployment_template(d)[1] != current[1]}
            share = max(1, math.ceil(ROLL_SHARE * max(replicas_of(group), len(stale_names))))
            room = share - len(draining) - len(done)
            start = [n for n in waiting if n in other_image]
            start += [n for n in waiting if n not in other_image][: max(0, room - len(start))]
        if start:
            log.info("worker group %s: draining %s (a new template)", name, ", ".join(start))
            self._dask.close_gracefully([dask[n].address for n in start])
            for worker_name in start:
                self._draining_since[worker_name] = now
        if done:
            self._retire(group, done, dask)
        return set(stale_names) - set(done)

    def _retire(self, group: dict[str, Any], names: list[str], dask: dict[str, DaskWorker]) -> None:
        """Retire the workers in Dask, delete their Deployments, and lower the group's replicas to match."""
        from kubernetes.client.exceptions import ApiException

        group_name = group["metadata"]["name"]
        addresses = [dask[n].address for n in names if n in dask]
        if addresses:
            self._dask.retire(addresses)
        for worker_name in names:
            try:
                self._api.delete_namespaced_deployment(worker_name, self._namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise PoolError(f"cannot remove worker {worker_name}: {exc.reason}") from exc
        log.info("worker group %s: retired %s; the operator adds their replacements", group_name, ", ".join(names))
        # Deleted first, then fewer replicas: the operator, seeing as many Deployments as replicas, retires no
        # other worker. The resourceVersion makes a concurrent scale win; the reconcile puts the size back.
        replicas, desired, surged = replicas_of(group), desired_of(group), _surge_of(group)
        body: dict[str, Any] = {
            "metadata": {"resourceVersion": group["metadata"].get("resourceVersion")},
            "spec": {"worker": {"replicas": max(0, replicas - len(names))}},
        }
        if surged:  # the replacements run already: the group shrinks back to its size
            left = max(0, surged - len(names))
            body["metadata"]["annotations"] = {SURGE_ANNOTATION: str(left) if left else None}
            if desired is not None:
                body["metadata"]["annotations"][DESIRED_ANNOTATION] = str(max(0, desired - len(names)))
        elif desired is None and group_name != self.default_group:  # the autoscaler sizes the default one
            body["metadata"]["annotations"] = {DESIRED_ANNOTATION: str(replicas)}
        try:
            self._patch(group_name, body)
        except _GroupChangedMeanwhile:
            # Scaled meanwhile: the operator counted the Deployments left, so its size already stands.
            log.info("worker group %s was scaled while its workers rolled; its new size stands", group_name)

    def _surge(self, group: dict[str, Any], workers: int) -> None:
        """Grow the group by ``workers`` new workers before any old one drains (its recorded size too, so the
        reconcile keeps them)."""
        name = group["metadata"]["name"]
        replicas = replicas_of(group)
        annotations = {
            SURGE_ANNOTATION: str(workers),
            DESIRED_ANNOTATION: str((desired_of(group) or replicas) + workers),
        }
        log.info("worker group %s: %d new worker(s) first, then the old one(s) drain", name, workers)
        self._patch(
            name, {"metadata": {"annotations": annotations}, "spec": {"worker": {"replicas": replicas + workers}}}
        )

    def _deployments(self, group_name: str) -> list[dict[str, Any]]:
        try:
            listing = self._api.list_namespaced_deployment(
                self._namespace, label_selector=f"{dask_operator.WORKER_GROUP_LABEL}={group_name}"
            )
        except Exception as exc:
            raise PoolError(f"cannot list the workers of {group_name}: {exc}") from exc
        return [d for d in listing.get("items", []) if not (d.get("metadata") or {}).get("deletionTimestamp")]

    def _patch(self, group_name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Merge ``body`` into the worker group. Raises ``PoolError``: ``_GroupChangedMeanwhile`` where the
        body's ``resourceVersion`` is no longer the group's (409)."""
        from kubernetes.client.exceptions import ApiException

        try:
            return self._api.patch_namespaced_custom_object(
                dask_operator.GROUP,
                dask_operator.VERSION,
                self._namespace,
                dask_operator.WORKER_GROUP_PLURAL,
                group_name,
                body,
            )
        except ApiException as exc:
            error = _GroupChangedMeanwhile if exc.status == 409 else PoolError
            raise error(f"cannot update worker group {group_name}: {exc.reason}") from exc
        except Exception as exc:
            raise PoolError(f"cannot update worker group {group_name}: {exc}") from exc
