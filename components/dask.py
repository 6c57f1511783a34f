"""``DaskCluster``: the dask-kubernetes operator and the GPU Dask cluster it runs, in namespace ``compute``.

The operator is installed from its Helm chart; the DaskCluster, extra DaskWorkerGroups and the
DaskAutoscaler are custom resources that wait for that release (it installs their CRDs). The operator
reconciles only replica counts after creation (https://kubernetes.dask.org/en/latest/operator_resources.html),
so what else changes is handled per object:

- The DaskCluster is replaced (deleted first: its name is fixed) only when its scheduler revision changes: the
  locked Dask or Python version or the scheduler's settings, never the image digest alone. Replacing it stops
  the scheduler and every worker; a deploy that changes only code leaves them running.
- Worker groups are updated in place. A new template reaches the workers the operator adds from then on, and the
  gpu-scheduler rolls the running ones, each after its jobs finish (runtime.scheduler.pools.rollout). Their
  replica counts belong to the gpu-scheduler and the autoscaler once created, so the program never sets them again.
- The DaskAutoscaler holds only bounds, which the gpu-scheduler pins; a bound changed in the stack replaces it.
- The operator adopts every worker group and the autoscaler (owner references to the DaskCluster), so deleting
  the cluster garbage-collects them. Each carries the cluster's scheduler revision as a label and is replaced
  (deleted first) when it changes: the same ``pulumi up`` that replaces the cluster makes them afresh, instead of
  updating objects Kubernetes has already deleted (the provider's update fails NotFound).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pulumi
import pulumi_kubernetes as k8s

from components.config import GpuPoolConfig
from components.k8s_objects import apply_manifest
from runtime.manifests import common, gpu_options, network, provisioning
from runtime.manifests import dask as manifests
from runtime.manifests.helm_values import Chart, dask_operator_chart, dask_operator_crds, dask_operator_values
from runtime.protocol import contract

TYPE = "gpu-runtime:dask:DaskCluster"
# The DaskCluster's only replacing change: the scheduler's template metadata, which carries its revision
# (runtime.manifests.dask.scheduler_revision). The operator ignores later edits of the rest of its spec.
CLUSTER_REPLACE_ON: Final = ["spec.scheduler.metadata"]
# The cluster's children (worker groups, autoscaler) carry that revision in their labels, and are replaced with it.
CHILD_REPLACE_ON: Final = ["metadata.labels"]
GROUP_IGNORE: Final = ["spec.worker.replicas"]
SCHEDULER_DOCKERFILE: Final = Path(__file__).resolve().parents[1] / "docker" / "scheduler.Dockerfile"


def worker_pools(gpu_pools: Sequence[GpuPoolConfig]) -> list[manifests.WorkerPoolSpec]:
    """The stack's GPU pools as Dask worker pools.

    A whole-GPU pool runs one worker per node holding all of its GPUs. A shared (time-sharing, MPS) or
    partitioned (MIG) pool runs one worker per GPU resource the node advertises, each claiming one: GKE
    lets a container take at most one shared GPU, and a CUDA process sees only one MIG partition. Either
    way a node's workers advertise as many ``GPU`` Dask resources as the node has slots, so the scheduler's
    flow control admits as many jobs as can run. A queued pool's workers also select its GKE node pool.
    """
    return [_worker_pool(pool) for pool in gpu_pools]


def _worker_pool(pool: GpuPoolConfig) -> manifests.WorkerPoolSpec:
    # The node's workers share its boot disk: each requests its scratch, so no more land on a node than fit.
    try:
        scratch = manifests.worker_scratch_gib(pool.disk_size_gb, pool.workers_per_node)
    except ValueError as exc:
        raise ValueError(f"gpuPools[{pool.name}].diskSizeGb: {exc}") from None
    return manifests.WorkerPoolSpec(
        name=pool.name,
        accelerator_type=pool.accelerator_type,
        gpus_per_worker=1 if pool.shares_gpus else pool.accelerator_count,
        min_workers=pool.dask_workers_min,
        max_workers=pool.dask_workers_max,
        resources=manifests.worker_resources(
            pool.machine_type, 1 if pool.shares_gpus else pool.accelerator_count, pool.workers_per_node, scratch
        ),
        node_selector={**sharing_node_selector(pool), **queued_node_selector(pool)},
        queued=pool.queued_provisioning,
        scratch_size=f"{scratch}Gi",
    )


def sharing_node_selector(pool: GpuPoolConfig) -> dict[str, str]:
    """The node labels GKE puts on a shared or partitioned pool's nodes, so its workers land only there."""
    selector = {}
    if pool.gpu_sharing is not None:
        selector[gpu_options.SHARING_STRATEGY_LABEL] = gpu_options.STRATEGY_LABEL_VALUES[pool.gpu_sharing.strategy]
        selector[gpu_options.MAX_SHARED_CLIENTS_LABEL] = str(pool.gpu_sharing.max_shared_clients_per_gpu)
    if pool.gpu_partition_size is not None:
        selector[gpu_options.PARTITION_SIZE_LABEL] = pool.gpu_partition_size
    return selector


def queued_node_selector(pool: GpuPoolConfig) -> dict[str, str]:
    """A queued pool's workers select its own GKE node pool, as its ProvisioningRequests' PodTemplates (the
    workers' own pod spec) must: GKE sizes and places the requested nodes for that pool only."""
    return provisioning.node_selector(pool.name) if pool.queued_provisioning else {}


def scheduler_python(dockerfile: Path = SCHEDULER_DOCKERFILE) -> str:
    """The Python version (``3.11``) of the scheduler image's pinned base, which the Dask scheduler runs on."""
    match = re.search(r"^ARG PYTHON_BASE=python:(\d+\.\d+)", dockerfile.read_text(), re.MULTILINE)
    if match is None:
        raise ValueError(f"{dockerfile}: no `ARG PYTHON_BASE=python:<version>` to read the scheduler's Python from")
    return match.group(1)


@dataclass
class DaskClusterArgs:
    """Inputs of the Dask cluster."""

    image: pulumi.Input[str]
    """Worker image (with the kernels and CUDA)."""
    scheduler_image: pulumi.Input[str]
    """The Dask scheduler's image: the gpu-scheduler image (CPU only; the same lock, so the same Dask)."""
    pools: Sequence[manifests.WorkerPoolSpec]
    """One entry per GPU node pool; the first is the primary pool (autoscaled by the DaskAutoscaler)."""
    runtime_service_account_email: pulumi.Input[str]
    """Google service account the workers impersonate (``gpu-runtime``, Workload Identity)."""
    name: str = contract.DASK_CLUSTER_NAME
    """DaskCluster name."""
    scheduler_resources: common.Resources = manifests.SCHEDULER_RESOURCES
    """Dask scheduler CPU and memory (it never gets a GPU)."""
    operator_chart: Chart = field(default_factory=dask_operator_chart)
    """Operator chart and version; defaults to the locked dask-kubernetes version."""
    scheduler_python: str = field(default_factory=scheduler_python)
    """Python version of the scheduler image's base; defaults to what its Dockerfile pins."""
    operator_image_digest: str | None = None
    """``sha256:…`` of the operator's image at that version (``images.operatorDigest``); without it the release
    runs the chart's tag, which the deploy gate refuses."""


class DaskCluster(pulumi.ComponentResource):
    """Namespace ``compute``, its NetworkPolicies, the workers' service account, the operator and the cluster."""

    namespace: pulumi.Output[str]
    """The namespace the cluster runs in."""
    scheduler_address: pulumi.Output[str]
    """In-cluster ``tcp://`` address of the Dask scheduler."""
    worker_groups: pulumi.Output[dict[str, str]]
    """Pool name to DaskWorkerGroup name."""

    def __init__(self, name: str, args: DaskClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE, name, None, opts)
        spec = manifests.DaskClusterSpec(
            image=args.image,  # Outputs: builders place them, never inspect them
            scheduler_image=args.scheduler_image,
            pools=tuple(args.pools),
            name=args.name,
            scheduler_resources=args.scheduler_resources,
            scheduler_python=args.scheduler_python,
        )
        child = pulumi.ResourceOptions(parent=self)
        ns = apply_manifest(name, common.namespace(contract.COMPUTE_NAMESPACE), child)
        in_ns = pulumi.ResourceOptions(parent=self, depends_on=[ns])
        account = apply_manifest(
            name, manifests.build_runtime_service_account(args.runtime_service_account_email), in_ns
        )
        for policy in network.build_compute_policies(spec.name):
            apply_manifest(name, policy, in_ns)
        # The operator in a namespace of its own: the gpu-scheduler's delete on Deployments in `compute` (queued
        # pools) cannot reach it (contract.DASK_OPERATOR_NAMESPACE). It watches every namespace (its chart's
        # cluster-wide RBAC), so it still runs the cluster in `compute`.
        operator_ns = apply_manifest(name, common.namespace(contract.DASK_OPERATOR_NAMESPACE), child)
        # The operator's namespace gets policies named like the compute namespace's (default-deny-ingress):
        # a prefix of their own keeps the two resources' URNs apart.
        for policy in network.build_operator_policies():
            apply_manifest(f"{name}-operator", policy,
                           pulumi.ResourceOptions(parent=self, depends_on=[operator_ns]))
        chart = args.operator_chart
        # The CRDs are the project's to apply and upgrade (Helm never upgrades a chart's crds/), before the
        # operator that serves them; cluster-scoped, they hold whatever DaskClusters exist, so never deleted first.
        crds = [apply_manifest(f"{name}-operator", crd, child) for crd in dask_operator_crds()]
        release = k8s.helm.v3.Release(
            f"{name}-operator",
            name=chart.name,
            chart=chart.name,
            version=chart.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository),
            namespace=contract.DASK_OPERATOR_NAMESPACE,
            values=dask_operator_values(args.operator_image_digest),
            skip_crds=True,
            atomic=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns, operator_ns, *crds]),
        )
        after_release = pulumi.ResourceOptions(parent=self, depends_on=[release, account])
        cluster = apply_manifest(name, manifests.build_dask_cluster(spec), pulumi.ResourceOptions.merge(
            after_release, pulumi.ResourceOptions(replace_on_changes=CLUSTER_REPLACE_ON, delete_before_replace=True)))
        # The operator adopts the groups and the autoscaler (controller.py: daskworkergroup_create and
        # daskautoscaler_create call `cluster.adopt`), so Kubernetes' garbage collector deletes them with the cluster;
        # their revision label changes with the cluster's, which replaces them in the same update (deleted first:
        # fixed names; the provider's delete of an object already gone succeeds).
        after_cluster = pulumi.ResourceOptions.merge(after_release, pulumi.ResourceOptions(
            depends_on=[cluster], replace_on_changes=CHILD_REPLACE_ON, delete_before_replace=True))
        # Under server-side apply a field another manager has set conflicts with the program's value: replicas
        # are the gpu-scheduler's and the autoscaler's after creation (ignoreChanges, as the provider advises).
        in_place = pulumi.ResourceOptions.merge(after_cluster, pulumi.ResourceOptions(ignore_changes=GROUP_IGNORE))
        groups = {spec.primary.name: manifests.worker_group_name(spec.name, spec.primary.name, primary=True)}
        for pool in spec.pools[1:]:
            group = manifests.build_worker_group(spec, pool)
            apply_manifest(name, group, in_place)
            groups[pool.name] = group["metadata"]["name"]
        # Jobs that need no GPU (the post-deploy probe) run at once on an idle platform (docs/infrastructure.md).
        cpu_group = manifests.build_cpu_worker_group(spec)
        apply_manifest(name, cpu_group, in_place)
        groups[contract.CPU_POOL] = cpu_group["metadata"]["name"]
        apply_manifest(name, manifests.build_autoscaler(spec), pulumi.ResourceOptions.merge(
            after_cluster, pulumi.ResourceOptions(replace_on_changes=["spec"])))

        apply_manifest(name, manifests.build_scheduler_disruption_budget(spec), in_ns)

        self.namespace = ns.metadata.apply(lambda meta: meta["name"])
        self.scheduler_address = cluster.id.apply(lambda _: manifests.scheduler_address(spec.name))
        self.worker_groups = pulumi.Output.from_input(groups)
        self.register_outputs(
            {
                "namespace": self.namespace,
                "scheduler_address": self.scheduler_address,
                "worker_groups": self.worker_groups,
                "operator_release": release.status.apply(lambda status: status["status"] if status else None),
            }
        )
