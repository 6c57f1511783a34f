"""Dask workers are registered and advertise the GPU resource GPU tasks ask for; the deployed worker bounds are
the stack's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runtime.manifests import dask_operator
from runtime.manifests.worker_group import desired_of, max_workers_of, pool_of
from runtime.protocol import contract
from validation.adapters.dask_info import DaskInfo
from validation.adapters.kube import KubeApi
from validation.runner import Check, CheckFailed, CheckSkipped


@dataclass(frozen=True)
class PoolBounds:
    """A GPU pool's Dask worker bounds as the stack's config says them (``daskWorkersMin``/``daskWorkersMax``)."""

    pool: str
    minimum: int
    maximum: int
    queued: bool = False


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


def _autoscaler_problem(autoscaler: dict | None, primary: PoolBounds, default_group: dict | None) -> str | None:
    name = f"{contract.DASK_CLUSTER_NAME}{contract.DASK_AUTOSCALER_SUFFIX}"
    if autoscaler is None:
        return f"DaskAutoscaler {name} is missing"
    spec = autoscaler.get("spec") or {}
    deployed = (spec.get("minimum"), spec.get("maximum"))
    # A queued primary pool is never autoscaled from Dask's pending work (runtime/manifests/dask.py).
    wanted = (primary.minimum, 0 if primary.queued else primary.maximum)
    if deployed == wanted:
        return None
    pinned = desired_of(default_group) if default_group is not None else None
    if deployed[0] == deployed[1] == pinned:
        return None  # `gpurt pools scale/stop` pinned the bounds to the size an operator chose
    return (f"DaskAutoscaler {name} bounds {deployed[0]}..{deployed[1]}, the stack says {wanted[0]}..{wanted[1]} "
            f"(pool {primary.pool})")


def autoscaler_bounds(kube: KubeApi, expected: Sequence[PoolBounds]) -> Check:
    """The deployed worker bounds are the stack's: the DaskAutoscaler's for the primary pool (unless an operator
    pinned it with ``gpurt pools scale``), and each other pool's DaskWorkerGroup ``daskWorkersMax`` annotation."""

    def run() -> str:
        if not expected:
            raise CheckSkipped("the stack's last update names no GPU pools")
        namespace = contract.COMPUTE_NAMESPACE
        autoscalers = {a["metadata"]["name"]: a for a in kube.list_custom_objects(
            dask_operator.GROUP, dask_operator.VERSION, namespace, dask_operator.AUTOSCALER_PLURAL)}
        groups = {pool_of(g, contract.DASK_CLUSTER_NAME): g
                  for g in kube.list_custom_objects(dask_operator.GROUP, dask_operator.VERSION, namespace,
                                                          dask_operator.WORKER_GROUP_PLURAL)}
        primary, *others = expected
        problems = []
        if (problem := _autoscaler_problem(
                autoscalers.get(f"{contract.DASK_CLUSTER_NAME}{contract.DASK_AUTOSCALER_SUFFIX}"), primary,
                groups.get(primary.pool))) is not None:
            problems.append(problem)
        for bounds in others:
            group = groups.get(bounds.pool)
            if group is None:
                problems.append(f"no DaskWorkerGroup for pool {bounds.pool}")
            elif (deployed := max_workers_of(group)) != bounds.maximum:
                problems.append(f"DaskWorkerGroup {group['metadata']['name']} allows {deployed} workers "
                                f"({contract.DASK_MAX_WORKERS_ANNOTATION}), the stack says {bounds.maximum} "
                                f"(pool {bounds.pool})")
        if problems:
            raise CheckFailed("; ".join(problems), "the cluster drifted from the stack, or the deploy did not "
                              "finish: run `pulumi up` for the stack (or `gpurt rollback --stack`)")
        return f"{len(expected)} pool(s) bounded as the stack says ({', '.join(b.pool for b in expected)})"

    return Check("dask.autoscaler-bounds", run)
