"""Worker pools: a Dask worker group in the cloud, a named set of the local Dask cluster's workers on one machine."""

from runtime.scheduler.pools.base import PoolBackend, PoolError, PoolInfo, PoolNotFound

__all__ = ["PoolBackend", "PoolError", "PoolInfo", "PoolNotFound"]
