"""A Dask cluster the platform does not manage: one pool of whatever workers its scheduler has.

With ``GPURT_POOLS=external`` and ``GPURT_DASK_SCHEDULER`` set, the gpu-scheduler submits to a Dask
cluster somebody else runs (a self-managed cluster outside GKE, ``dask scheduler`` and ``dask worker``
processes started by hand, or an HPC batch system's Dask). It can read that cluster's workers but not start
or stop them, so the pool reports what is there, sizes the job slots from it, and refuses to scale or evict:
the cluster is scaled where it runs.
"""

from __future__ import annotations

from typing import Any, Final

from runtime.protocol import contract
from runtime.scheduler.backends.dask_workers import DaskWorkers
from runtime.scheduler.pools.base import PoolError, PoolInfo, PoolNotFound, pool_status

EXTERNAL_POOL: Final = "external"


class ExternalPools:
    """The workers of an external Dask cluster, read through ``client`` (a ``distributed.Client``), as one pool."""

    def __init__(self, client: Any, address: str) -> None:
        self._workers = DaskWorkers(client)
        self._address = address

    def list(self) -> list[PoolInfo]:
        """The one pool: every worker the Dask scheduler has now (desired is what is there)."""
        workers = self._workers.read()
        gpus = {int(w.get("resources", {}).get(contract.DASK_GPU_RESOURCE, 0)) for w in workers}
        running = len(workers)
        return [PoolInfo(id=EXTERNAL_POOL, desired=running, workers=running, gpus_per_worker=max(gpus, default=0),
                         status=pool_status(running, running))]

    def scale(self, pool_id: str, workers: int) -> PoolInfo:
        """Refused: the platform does not manage this cluster's workers."""
        raise self._refusal(pool_id, "scaled")

    def stop(self, pool_id: str) -> PoolInfo:
        """Refused: the platform does not manage this cluster's workers."""
        raise self._refusal(pool_id, "stopped")

    def stop_all(self) -> list[PoolInfo]:
        """Refused: the platform does not manage this cluster's workers."""
        raise self._refusal(EXTERNAL_POOL, "stopped")

    def reconcile(self) -> None:
        """Nothing to bring back: the cluster's own manager keeps its workers."""

    def gpu_slots(self) -> int:
        """GPUs the workers advertise; without GPU workers, one slot per worker thread (at least 1)."""
        return max(1, self._workers.slots())

    def _refusal(self, pool_id: str, done: str) -> PoolError:
        if pool_id != EXTERNAL_POOL:
            return PoolNotFound(f"no pool {pool_id!r}; pools: [{EXTERNAL_POOL!r}]")
        return PoolError(f"the Dask cluster at {self._address} is not managed by this platform "
                         f"({contract.SchedulerEnv.POOLS}=external): its workers are {done} where it runs")
