"""Dask scheduler seam: the workers it has registered and the resources they advertise."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from runtime.protocol import contract
from validation.adapters.kube import KubeApi


@dataclass(frozen=True)
class WorkerInfo:
    """A registered Dask worker and its resources (``{"GPU": 1}`` on a GPU worker)."""

    address: str
    resources: dict[str, float] = field(default_factory=dict)


class DaskInfo(Protocol):
    """The Dask scheduler's view of its workers."""

    def workers(self) -> list[WorkerInfo]:
        """Registered workers."""
        ...


def workers_from_identity(identity: dict[str, Any]) -> list[WorkerInfo]:
    """Workers out of a scheduler identity (``Scheduler.identity()`` / ``/json/identity.json``)."""
    return [WorkerInfo(address=address, resources=dict(worker.get("resources") or {}))
            for address, worker in identity.get("workers", {}).items()]


class KubeServiceDask:
    """``DaskInfo`` reading the Dask scheduler dashboard's ``json/identity.json`` through a port-forward to the
    scheduler pod (a private cluster's control plane cannot proxy to port 8787; see ``KubeApi.pod_get``)."""

    def __init__(self, kube: KubeApi) -> None:
        self._kube = kube

    def workers(self) -> list[WorkerInfo]:
        """Registered workers, from the dashboard's identity document of a ready scheduler pod."""
        pods = [pod for pod in self._kube.list_pods(contract.COMPUTE_NAMESPACE, contract.DASK_SCHEDULER_LABELS)
                if pod.ready]
        if not pods:
            raise RuntimeError(f"no ready Dask scheduler pod in {contract.COMPUTE_NAMESPACE} "
                               f"(labels {contract.DASK_SCHEDULER_LABELS})")
        body = self._kube.pod_get(contract.COMPUTE_NAMESPACE, pods[0].name, contract.DASK_DASHBOARD_PORT,
                                  "/json/identity.json")
        return workers_from_identity(json.loads(body))


class ApiPoolsDask:
    """``DaskInfo`` from the gpu-scheduler's ``GET /pools``: its Dask workers as each pool counts them.

    The local platform's Dask cluster lives inside the scheduler process, so its registered workers are
    seen through the API (``workers`` counts registered workers, ``gpus_per_worker`` their GPU resource).
    """

    def __init__(self, api_url: str, token: str | None) -> None:
        self._api_url, self._token = api_url, token

    def workers(self) -> list[WorkerInfo]:
        """One ``WorkerInfo`` per registered worker of every pool."""
        from runtime.access.control_api import ApiClient

        with ApiClient(self._api_url, self._token) as api:
            pools = api.pools()
        found = []
        for pool in pools:
            gpus = float(getattr(pool, "gpus_per_worker", 0) or 0)
            resources = {contract.DASK_GPU_RESOURCE: gpus} if gpus > 0 else {}
            found += [WorkerInfo(address=f"{pool.id}/{i}", resources=resources) for i in range(pool.workers)]
        return found
