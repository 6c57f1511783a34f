"""The pool of an external Dask cluster: what its scheduler has, read for real; never scaled from here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from runtime.scheduler.pools.base import PoolError, PoolNotFound
from runtime.scheduler.pools.external import EXTERNAL_POOL, ExternalPools


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """Two workers, one with the GPU resource and two threads, one plain with three, in this process."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster, Client(cluster) as dask:
        yield dask


def test_the_pool_is_whatever_the_cluster_has(client: Any) -> None:
    from distributed import Worker

    pools = ExternalPools(client, "tcp://dask.example:8786")
    assert pools.list()[0].workers == 0 and pools.gpu_slots() == 1  # nothing yet: one slot, so intake waits

    async def add(**options: Any) -> Any:
        return await Worker(client.scheduler.address, **options)

    plain = client.sync(add, nthreads=3)
    try:
        [pool] = pools.list()
        assert (pool.id, pool.workers, pool.desired, pool.gpus_per_worker, pool.status) == (
            EXTERNAL_POOL, 1, 1, 0, "running")
        assert pools.gpu_slots() == 3  # no GPU workers: a slot per thread
        gpu = client.sync(add, nthreads=2, resources={"GPU": 1})
        try:
            assert pools.list()[0].gpus_per_worker == 1
            assert pools.gpu_slots() == 1  # GPU workers: a slot per GPU
        finally:
            client.sync(gpu.close)
    finally:
        client.sync(plain.close)


def test_scaling_or_evicting_is_refused_with_the_reason(client: Any) -> None:
    pools = ExternalPools(client, "tcp://dask.example:8786")
    with pytest.raises(PoolError, match=r"tcp://dask.example:8786 is not managed by this platform"):
        pools.scale(EXTERNAL_POOL, 4)
    with pytest.raises(PoolError, match="stopped where it runs"):
        pools.stop_all()
    with pytest.raises(PoolNotFound, match="no pool 'gpu'"):
        pools.stop("gpu")
    pools.reconcile()  # nothing to do, and no error
