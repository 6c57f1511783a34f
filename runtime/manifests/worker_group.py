"""A Dask worker group (``DaskWorkerGroup``) as the Kubernetes API returns it: what the cloud pools read from it.

Both the generic pools (``runtime.scheduler.pools.kubernetes``) and the queued provisioning
(``runtime.scheduler.pools.queued``) read a group's replicas, annotations and recorded desired size the same way.
"""

from __future__ import annotations

from typing import Any, Final

from runtime.protocol import contract

DESIRED_ANNOTATION: Final = "gpu-runtime.dev/desired-replicas"


def replicas_of(group: dict[str, Any]) -> int:
    return int(group.get("spec", {}).get("worker", {}).get("replicas", 0))


def annotations_of(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def desired_of(group: dict[str, Any]) -> int | None:
    value = annotations_of(group).get(DESIRED_ANNOTATION)
    return int(value) if value is not None and str(value).isdigit() else None


def max_workers_of(group: dict[str, Any]) -> int | None:
    """The stack's upper bound on the group's workers (daskWorkersMax), where the stack rendered one."""
    value = annotations_of(group).get(contract.DASK_MAX_WORKERS_ANNOTATION)
    return int(value) if value is not None and str(value).isdigit() else None


def pool_of(group: dict[str, Any], cluster: str) -> str:
    """The pool a group serves: its pool label (the operator's default group carries it on its worker
    template), else its name without the ``<cluster>-`` prefix."""
    worker_labels = group.get("spec", {}).get("worker", {}).get("metadata", {}).get("labels") or {}
    labels = {**worker_labels, **(group.get("metadata", {}).get("labels") or {})}
    return str(labels.get(contract.DASK_POOL_LABEL) or str(group["metadata"]["name"]).removeprefix(f"{cluster}-"))


def gpus_per_worker(group: dict[str, Any]) -> int:
    """GPUs each of the group's workers claims (its template's ``nvidia.com/gpu`` limit); 0 for a CPU worker."""
    containers = group.get("spec", {}).get("worker", {}).get("spec", {}).get("containers", [])
    for container in containers:
        limits = (container.get("resources") or {}).get("limits") or {}
        if contract.GPU_RESOURCE in limits:
            return int(limits[contract.GPU_RESOURCE])
    return 0
