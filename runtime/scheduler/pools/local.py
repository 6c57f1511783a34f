"""Pools of the local Dask cluster: each pool is a named group of worker specs of one SpecCluster.

A worker spec named ``<pool>-<n>`` belongs to ``<pool>``. Scaling edits the cluster's ``worker_spec``
and lets the cluster correct its state (start or retire Nanny processes) - the same path
``SpecCluster.scale`` takes, but per pool. Retired workers hand their tasks back to the Dask
scheduler, which runs them elsewhere.

On a machine with GPUs each worker gets one (``CUDA_VISIBLE_DEVICES``, round robin) and advertises the
Dask resource ``GPU: 1`` - what dask-cuda's LocalCUDACluster does, without needing dask-cuda.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

from runtime.protocol import contract
from runtime.scheduler.pools.base import PoolError, PoolInfo, PoolNotFound, check_workers, pool_status


def worker_spec(template: dict[str, Any], index: int, gpus: int) -> dict[str, Any]:
    """The spec of the ``index``-th worker of a pool: ``template``, pinned to one GPU when there are any."""
    spec = copy.deepcopy(template)
    if gpus > 0:
        options = spec.setdefault("options", {})
        options["resources"] = {**options.get("resources", {}), contract.DASK_GPU_RESOURCE: 1}
        options["env"] = {**options.get("env", {}), "CUDA_VISIBLE_DEVICES": str(index % gpus)}
    return spec


class LocalPools:
    """Named worker groups of ``cluster`` (a ``distributed.SpecCluster``: ``runtime.scheduler.local_cluster``'s)."""

    def __init__(self, cluster: Any, desired: dict[str, int], gpus: int = 0,
                 on_evict: Callable[[str], None] = lambda pool: None) -> None:
        self._cluster = cluster
        self._template = copy.deepcopy(cluster.new_spec)
        self._gpus = gpus
        self._desired = dict(desired)
        self._lock = threading.Lock()
        self._on_evict = on_evict
        self.reconcile()

    def list(self) -> list[PoolInfo]:
        """Every pool with desired and running workers."""
        running = self._running_by_pool()
        with self._lock:
            return [self._info(pool, running.get(pool, 0)) for pool in sorted(self._desired)]

    def scale(self, pool_id: str, workers: int) -> PoolInfo:
        """Set the desired size of ``pool_id`` and start or retire workers to match."""
        check_workers(workers)
        with self._lock:
            if pool_id not in self._desired:
                raise PoolNotFound(f"no pool {pool_id!r}; pools: {sorted(self._desired)}")
            self._desired[pool_id] = workers
        # Returns at once (status `scaling`): starting worker processes takes seconds, an API call should not.
        self._apply(wait=False)
        return self._info(pool_id, self._running_by_pool().get(pool_id, 0))

    def stop(self, pool_id: str) -> PoolInfo:
        """Evict ``pool_id``."""
        info = self.scale(pool_id, 0)
        self._on_evict(pool_id)
        return info

    def stop_all(self) -> list[PoolInfo]:
        """Evict every pool."""
        with self._lock:
            pools = sorted(self._desired)
        return [self.stop(pool) for pool in pools]

    def reconcile(self) -> None:
        """Make the cluster's worker specs match the desired sizes and wait for it (idempotent)."""
        self._apply(wait=True)

    def _apply(self, wait: bool) -> None:
        with self._lock:
            spec = self._cluster.worker_spec
            for pool, want in self._desired.items():
                names = sorted(name for name in spec if _pool_of(name) == pool)
                for name in names[want:]:
                    del spec[name]
                index = 0
                while sum(1 for name in spec if _pool_of(name) == pool) < want:
                    name = f"{pool}-{index}"
                    if name not in spec:
                        spec[name] = worker_spec(self._template, index, self._gpus)
                    index += 1
        try:
            # SpecCluster.scale takes the same path: edit worker_spec, let the cluster correct its state.
            if wait:
                self._cluster.sync(self._cluster._correct_state)
            else:
                self._cluster.loop.add_callback(self._cluster._correct_state)
        except Exception as exc:
            raise PoolError(f"the local Dask cluster could not change its workers: {exc}") from exc

    def gpu_slots(self) -> int:
        """Worker slots the pools want (each local worker runs one job at a time)."""
        with self._lock:
            return sum(self._desired.values())

    def _running_by_pool(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for info in self._cluster.scheduler_info.get("workers", {}).values():
            pool = _pool_of(str(info.get("name", "")))
            counts[pool] = counts.get(pool, 0) + 1
        return counts

    def _info(self, pool: str, running: int) -> PoolInfo:
        desired = self._desired.get(pool, 0)
        return PoolInfo(id=pool, desired=desired, workers=running, gpus_per_worker=1 if self._gpus else 0,
                        status=pool_status(desired, running))


def _pool_of(worker_name: str) -> str:
    pool, sep, index = worker_name.rpartition("-")
    return pool if sep and index.isdigit() else worker_name
