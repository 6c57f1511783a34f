"""Dask workers are registered, and advertise the GPU resource GPU tasks ask for."""

from __future__ import annotations

from components import contract
from validation.clients.dask_info import DaskInfo
from validation.runner import Check, CheckFailed, CheckSkipped


def gpu_workers(dask: DaskInfo, gpu_expected: bool, scales_from_zero: bool = False) -> Check:
    """Workers exist; with ``gpu_expected`` each must advertise ``contract.DASK_GPU_RESOURCE``.

    Without a GPU (a laptop running the local platform) CPU workers are right, and the GPU half of the
    check is skipped with that reason rather than passed. Pools that scale from zero may rightly have no
    worker at all; then the check is skipped and says how to make it meaningful.
    """

    def run() -> str:
        workers = dask.workers()
        if not workers and scales_from_zero:
            raise CheckSkipped("no Dask worker running and every pool scales from zero: scale one up "
                               "(`gpurt pools scale POOL 1`) and validate again to check GPU registration")
        if not workers:
            raise CheckFailed("no Dask workers registered",
                              "start workers: scale a pool (`gpurt pools scale`) or restart the platform")
        gpu = [w for w in workers if w.resources.get(contract.DASK_GPU_RESOURCE, 0) > 0]
        if not gpu_expected and not gpu:
            raise CheckSkipped(f"{len(workers)} CPU worker(s) registered; no GPU on this machine, so no "
                               f"{contract.DASK_GPU_RESOURCE} resource to check")
        if len(gpu) < len(workers):
            without = ", ".join(w.address for w in workers if w not in gpu)
            raise CheckFailed(f"{len(workers) - len(gpu)} of {len(workers)} worker(s) lack the "
                              f"{contract.DASK_GPU_RESOURCE} resource: {without}",
                              f"start GPU workers with --resources {contract.DASK_GPU_RESOURCE}=1 "
                              "(the DaskCluster worker groups set it)")
        total = sum(w.resources[contract.DASK_GPU_RESOURCE] for w in gpu)
        return f"{len(gpu)} GPU worker(s), {total:g} {contract.DASK_GPU_RESOURCE} in all"

    return Check("dask.gpu-workers", run)
