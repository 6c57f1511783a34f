"""Dask workers are registered and advertise the GPU resource GPU tasks ask for; the deployed worker bounds are
the ones the deploy's own builders render for the stack."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from runtime.manifests import dask_operator
from runtime.manifests.common import Manifest
from runtime.manifests.worker_group import desired_of, max_workers_of, pool_of
from runtime.protocol import contract
from validation.adapters.dask_info import DaskInfo
from validation.adapters.kube import KubeApi
from validation.runner import Check, CheckFailed, CheckSkipped


@dataclass(frozen=True)
class RenderedDask:
    """The Dask objects the deploy renders for the stack's config: ``runtime.manifests.dask``'s own builders
    (``build_autoscaler``, ``build_worker_group``), called with the pools ``components.dask.worker_pools`` makes
    of the stack's ``gpuPools``, as the Pulumi program calls them."""

    primary_pool: str
    """The pool the cluster's own worker group serves, which the DaskAutoscaler bounds."""
    autoscaler: Manifest
    """The DaskAutoscaler."""
    worker_groups: Mapping[str, Manifest]
    """Pool name to its DaskWorkerGroup, for every GPU pool but the primary one."""

    @property
    def pools(self) -> list[str]:
        """Every GPU pool, the primary one first."""
        return [self.primary_pool, *self.worker_groups]


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


def _bounds(autoscaler: Manifest) -> tuple[int | None, int | None]:
    spec = autoscaler.get("spec") or {}
    return spec.get("minimum"), spec.get("maximum")


def _autoscaler_problem(autoscaler: Manifest | None, expected: RenderedDask,
                        default_group: Manifest | None) -> str | None:
    name = expected.autoscaler["metadata"]["name"]
    if autoscaler is None:
        return f"DaskAutoscaler {name} is missing"
    deployed, wanted = _bounds(autoscaler), _bounds(expected.autoscaler)
    if deployed == wanted:
        return None
    pinned = desired_of(default_group) if default_group is not None else None
    if deployed[0] == deployed[1] == pinned:
        return None  # `gpurt pools scale/stop` pinned the bounds to the size an operator chose
    return (f"DaskAutoscaler {name} bounds {deployed[0]}..{deployed[1]}, the stack says {wanted[0]}..{wanted[1]} "
            f"(pool {expected.primary_pool})")


def _group_problem(group: Manifest | None, rendered: Manifest, pool: str) -> str | None:
    if group is None:
        return f"no DaskWorkerGroup for pool {pool}"
    if (deployed := max_workers_of(group)) != (wanted := max_workers_of(rendered)):
        return (f"DaskWorkerGroup {group['metadata']['name']} allows {deployed} workers "
                f"({contract.DASK_MAX_WORKERS_ANNOTATION}), the stack says {wanted} (pool {pool})")
    return None


def autoscaler_bounds(kube: KubeApi, expected: RenderedDask | None) -> Check:
    """The deployed worker bounds are the ones the deploy renders for the stack: the DaskAutoscaler's minimum and
    maximum (unless an operator pinned them with ``gpurt pools scale``), and each other pool's DaskWorkerGroup
    ``contract.DASK_MAX_WORKERS_ANNOTATION``."""

    def run() -> str:
        if expected is None:
            raise CheckSkipped("no rendered Dask objects to compare with: the target was built without the "
                               "stack's config")
        namespace = contract.COMPUTE_NAMESPACE
        autoscalers = {a["metadata"]["name"]: a for a in kube.list_custom_objects(
            dask_operator.GROUP, dask_operator.VERSION, namespace, dask_operator.AUTOSCALER_PLURAL)}
        groups = {pool_of(g, contract.DASK_CLUSTER_NAME): g
                  for g in kube.list_custom_objects(dask_operator.GROUP, dask_operator.VERSION, namespace,
                                                          dask_operator.WORKER_GROUP_PLURAL)}
        problems = [_autoscaler_problem(autoscalers.get(expected.autoscaler["metadata"]["name"]), expected,
                                        groups.get(expected.primary_pool)),
                    *(_group_problem(groups.get(pool), rendered, pool)
                      for pool, rendered in expected.worker_groups.items())]
        if any(problems):
            raise CheckFailed("; ".join(p for p in problems if p), "the cluster drifted from the stack, or the "
                              "deploy did not finish: run `pulumi up` for the stack (or `gpurt rollback --stack`)")
        return f"{len(expected.pools)} pool(s) bounded as the stack says ({', '.join(expected.pools)})"

    return Check("dask.autoscaler-bounds", run)
