"""The Dask cluster in namespace ``compute``: a CPU-only scheduler and one GPU worker group per node pool.

Specs start from dask-kubernetes' own helpers (``make_cluster_spec``, ``make_worker_spec``) so they keep
the shape the operator expects, then this module corrects what the helpers get wrong for a GPU platform:
they give the scheduler the workers' resources (a GPU it would never use), run the deprecated
``dask-scheduler`` entry point, set a readiness timeout longer than its period, and harden nothing.

The operator names the cluster's own worker group ``<cluster>-default``; it serves the first (primary)
pool and is the one a ``DaskAutoscaler`` can scale. Further pools are ``DaskWorkerGroup`` objects named
``<cluster>-<pool>``. Every group carries ``contract.DASK_POOL_LABEL`` so it can be found by pool name.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any, Final

from runtime.manifests import dask_operator
from runtime.manifests.common import (
    Manifest,
    Resources,
    container_security_context,
    gpu_toleration,
    labels,
    metadata,
    pod_security_context,
    scratch_volume,
    workload_identity_service_account,
)
from runtime.manifests.dask_settings import dask_env
from runtime.protocol import contract

GKE_ACCELERATOR_LABEL: Final = "cloud.google.com/gke-accelerator"
# Kubernetes object names are DNS labels: at most 63 characters. The operator names worker pods
# `<group>-worker-<10 hex>`, which adds 18 characters to the group name.
MAX_NAME_LENGTH: Final = 63
WORKER_POD_SUFFIX_LENGTH: Final = len("-worker-") + 10
DEFAULT_GROUP_SUFFIX: Final = "default"
# Share of a node's vCPUs and memory a worker may take: the rest is for GKE's reservation, the kubelet and
# the node agents (DCGM exporter, logging), which on GPU machine sizes stay well under a quarter.
WORKER_NODE_SHARE: Final = 0.75
# Spill and scratch space for a worker, at most; Monte Carlo jobs keep their paths on the GPU, so little is needed.
WORKER_SCRATCH_GIB: Final = 20
WORKER_SCRATCH_SIZE: Final = f"{WORKER_SCRATCH_GIB}Gi"
TMP_GIB: Final = 1
TMP_SIZE: Final = f"{TMP_GIB}Gi"
# Below this a worker could not spill a single large result: the pool needs a larger boot disk.
MIN_SCRATCH_GIB: Final = 2
# GKE keeps part of a node's boot disk from pods: an eviction threshold of 10 % and a system reservation of
# min(50 %, 6 GiB + 35 %, 100 GiB) of the disk
# (https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#local_ephemeral_storage_reservation).
EVICTION_SHARE: Final = 0.10
# What the worker image and GKE's own images take of the same disk once unpacked.
IMAGE_RESERVE_GIB: Final = 15
SCHEDULER_RESOURCES: Final = Resources(cpu_request="1", memory_request="2Gi", cpu_limit="2", memory_limit="4Gi")
# The always-up CPU worker (jobs that need no GPU: probes, drills): one thread, on the system nodes. Its
# warm-up compiles the kernels' CPU twins once, at start; a gigabyte of memory is what that compile takes.
CPU_WORKER_RESOURCES: Final = Resources(cpu_request="250m", memory_request="1536Mi", cpu_limit="1",
                                        memory_limit="1536Mi", ephemeral_storage="4Gi")
CPU_WORKER_SCRATCH_SIZE: Final = "2Gi"
# The scheduler's HTTP health endpoint answers in milliseconds; a 5 s budget tolerates a busy event loop.
SCHEDULER_PROBE_TIMEOUT_S: Final = 5
SCHEDULER_READINESS_PERIOD_S: Final = 5
# Hex digits of a template digest: 64 bits tell a few hundred templates apart with no practical chance of a clash.
DIGEST_HEX: Final = 16

# vCPUs and GB of memory per GPU-capable machine family, as GCE defines its shapes.
_MACHINE_SHAPES: Final = (
    (re.compile(r"^n1-standard-(\d+)$"), lambda n: (n, 3.75 * n)),
    (re.compile(r"^n1-highmem-(\d+)$"), lambda n: (n, 6.5 * n)),
    (re.compile(r"^n1-highcpu-(\d+)$"), lambda n: (n, 0.9 * n)),
    (re.compile(r"^g2-standard-(\d+)$"), lambda n: (n, 4.0 * n)),
    (re.compile(r"^a2-highgpu-(\d+)g$"), lambda g: (12 * g, 85.0 * g)),
    (re.compile(r"^a2-ultragpu-(\d+)g$"), lambda g: (12 * g, 170.0 * g)),
    (re.compile(r"^a2-megagpu-16g$"), lambda _: (96, 1360.0)),
    (re.compile(r"^a3-highgpu-(\d+)g$"), lambda g: (26 * g, 234.0 * g)),
)


def pod_disk_gib(disk_size_gb: int) -> float:
    """The part of a node's boot disk GKE lets pods use (allocatable ephemeral storage), in GiB."""
    reservation = min(0.5 * disk_size_gb, 6 + 0.35 * disk_size_gb, 100)
    return disk_size_gb - reservation - EVICTION_SHARE * disk_size_gb


def worker_scratch_gib(disk_size_gb: int, workers_per_node: int) -> int:
    """Scratch space for each of ``workers_per_node`` workers on a ``disk_size_gb`` boot disk: their share of
    the pods' part after the images, less /tmp, at most ``WORKER_SCRATCH_GIB``.

    Raises ValueError when the share is below ``MIN_SCRATCH_GIB``.
    """
    share = (pod_disk_gib(disk_size_gb) - IMAGE_RESERVE_GIB) / workers_per_node - TMP_GIB
    if share < MIN_SCRATCH_GIB:
        raise ValueError(f"a {disk_size_gb} GB boot disk leaves {max(share, 0):.1f} GiB of scratch for each of "
                         f"{workers_per_node} workers (at least {MIN_SCRATCH_GIB} needed): raise diskSizeGb")
    return min(WORKER_SCRATCH_GIB, math.floor(share))


def worker_resources(machine_type: str, gpus: int, workers_per_node: int = 1,
                     scratch_gib: int | None = None) -> Resources:
    """Guaranteed-QoS resources for one of ``workers_per_node`` workers sharing a ``machine_type`` node, with
    ``gpus`` GPU resources each (a whole node's GPUs, or one shared or partitioned slot); with ``scratch_gib``,
    the local disk its scratch and /tmp volumes may fill.

    Raises ValueError for a machine type whose shape is not known here.
    """
    for pattern, shape in _MACHINE_SHAPES:
        match = pattern.match(machine_type)
        if match:
            vcpus, memory_gb = shape(int(match.group(1)) if match.groups() else 0)
            share = WORKER_NODE_SHARE / workers_per_node
            cpu = f"{math.floor(vcpus * share * 1000)}m"
            memory = f"{math.floor(memory_gb * share)}G"
            disk = f"{scratch_gib + TMP_GIB}Gi" if scratch_gib is not None else None
            return Resources(cpu_request=cpu, memory_request=memory, cpu_limit=cpu, memory_limit=memory, gpus=gpus,
                             ephemeral_storage=disk)
    raise ValueError(f"unknown machine type {machine_type!r}: set the worker resources explicitly")


@dataclass(frozen=True)
class WorkerPoolSpec:
    """One GPU node pool as the Dask cluster sees it: one worker per node, all of the node's GPUs."""

    name: str
    """Pool name (lowercase DNS label); the worker group is ``<cluster>-<name>``."""
    accelerator_type: str
    """GKE accelerator type, e.g. ``nvidia-tesla-t4``: the node label the workers select."""
    gpus_per_worker: int
    """GPUs one worker claims; also its thread count and its ``GPU`` Dask resource."""
    min_workers: int
    """Lower bound (the autoscaler's minimum, and the group's initial size)."""
    max_workers: int
    """Upper bound for the autoscaler and for pool scaling."""
    resources: Resources
    """Container resources, including the ``nvidia.com/gpu`` limit; see ``worker_resources``."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    """Node labels besides the GPU and accelerator ones, e.g. GKE's sharing or MIG partition labels."""
    queued: bool = False
    """The node pool uses queued provisioning: only the gpu-scheduler adds workers, once GKE has provisioned
    the capacity it requested for them (never the DaskAutoscaler, whose workers no request would cover)."""
    scratch_size: str = WORKER_SCRATCH_SIZE
    """Size cap of the worker's /scratch volume (its share of the node's disk; see ``worker_scratch_gib``)."""

    def __post_init__(self) -> None:
        if self.gpus_per_worker < 1:
            raise ValueError(f"pool {self.name!r}: gpus_per_worker must be at least 1")
        if not 0 <= self.min_workers <= self.max_workers:
            raise ValueError(f"pool {self.name!r}: need 0 <= min_workers <= max_workers")
        if self.queued and self.min_workers:
            raise ValueError(f"pool {self.name!r}: a queued pool starts without workers (min_workers 0)")
        if self.resources.gpus != self.gpus_per_worker:
            raise ValueError(
                f"pool {self.name!r}: resources claim {self.resources.gpus} GPUs, not {self.gpus_per_worker}"
            )


@dataclass(frozen=True)
class DaskClusterSpec:
    """The whole Dask cluster: image, pools (the first is primary) and the scheduler's resources."""

    image: str
    """Worker image: the kernels and the CUDA libraries."""
    scheduler_image: str
    """The Dask scheduler's image: the gpu-scheduler image, CPU only and a tenth of the worker's size, locked
    from the same ``uv.lock``, so scheduler, workers and the gpu-scheduler's client share one Dask version."""
    pools: Sequence[WorkerPoolSpec]
    """GPU pools; at least one."""
    name: str = contract.DASK_CLUSTER_NAME
    """DaskCluster name; the scheduler Service is ``<name>-scheduler``."""
    scheduler_resources: Resources = SCHEDULER_RESOURCES
    """CPU and memory of the Dask scheduler (never a GPU)."""
    scheduler_python: str = ""
    """Python version (``3.11``) of the scheduler image's base, part of the scheduler's revision; the component
    reads it from the image's Dockerfile (``components.dask.scheduler_python``)."""

    def __post_init__(self) -> None:
        if not self.pools:
            raise ValueError("a Dask cluster needs at least one GPU pool")
        names = [pool.name for pool in self.pools]
        if len(set(names)) != len(names):
            raise ValueError(f"pool names repeat: {names}")
        for pool in self.pools[1:]:
            worker_group_name(self.name, pool.name, primary=False)

    @property
    def primary(self) -> WorkerPoolSpec:
        """The pool served by the cluster's own (autoscaled) worker group."""
        return self.pools[0]


def worker_group_name(cluster: str, pool: str, *, primary: bool) -> str:
    """Name of the DaskWorkerGroup serving ``pool``; raises ValueError if its pods' names would be too long."""
    if primary:
        return f"{cluster}-{DEFAULT_GROUP_SUFFIX}"
    if pool == DEFAULT_GROUP_SUFFIX:
        raise ValueError(f"pool name {pool!r} is reserved for the cluster's own worker group")
    name = f"{cluster}-{pool}"
    if len(name) + WORKER_POD_SUFFIX_LENGTH > MAX_NAME_LENGTH:
        limit = MAX_NAME_LENGTH - WORKER_POD_SUFFIX_LENGTH - len(cluster) - 1
        raise ValueError(f"pool name {pool!r} is too long: at most {limit} characters with cluster {cluster!r}")
    return name


def scheduler_address(cluster: str) -> str:
    """In-cluster ``tcp://`` address of the scheduler Service the operator creates for ``cluster``."""
    return f"tcp://{cluster}-scheduler.{contract.COMPUTE_NAMESPACE}.svc.cluster.local:{contract.DASK_SCHEDULER_PORT}"


def worker_command(gpus: int) -> list[str]:
    """``dask worker`` with one thread and one ``GPU`` resource unit per GPU, its kernels warm before it joins.

    Plain ``dask worker`` rather than ``dask-cuda-worker``: the operator names each worker through
    ``--name``, and dask-cuda-worker starts one process per GPU, which cannot share one name. The
    preload compiles every kernel on the worker's GPU as the worker starts, and no kernel job runs there
    before that is done, so a worker from a scale-from-zero pool never compiles inside a user's job.
    """
    return [
        "dask",
        "worker",
        "--nthreads",
        str(gpus),
        "--resources",
        f"{contract.DASK_GPU_RESOURCE}={gpus}",
        "--local-directory",
        "/scratch",
        "--preload",
        contract.DASK_WORKER_PRELOAD,
    ]


def _worker_env() -> list[Manifest]:
    # The root filesystem is read-only: everything that caches (numba, matplotlib, pip) writes under /tmp.
    return [
        {"name": "HOME", "value": "/tmp"},
        {"name": "NUMBA_CACHE_DIR", "value": "/tmp/numba"},
        {"name": "MPLCONFIGDIR", "value": "/tmp/matplotlib"},
        *_dask_env(),
    ]


def _dask_env() -> list[Manifest]:
    """The platform's Dask settings (idle CPU, bounded logs: ``runtime.manifests.dask_settings``) for a Dask pod."""
    return [{"name": name, "value": value} for name, value in sorted(dask_env().items())]


def _harden(pod_spec: Manifest, service_account: str | None, scratch_size: str = WORKER_SCRATCH_SIZE) -> None:
    """Apply the project's security defaults to a pod spec made by dask-kubernetes, in place."""
    if service_account is not None:
        pod_spec["serviceAccountName"] = service_account
    # Workload Identity works through the metadata server; no Dask pod needs a Kubernetes API token.
    pod_spec["automountServiceAccountToken"] = False
    pod_spec["securityContext"] = pod_security_context()
    volumes = [scratch_volume("tmp", TMP_SIZE)]
    for container in pod_spec["containers"]:
        container["securityContext"] = container_security_context()
        if container.get("env") is None:
            container.pop("env", None)
        container["volumeMounts"] = [{"name": "tmp", "mountPath": "/tmp"}]
        if container["name"] == "worker":
            volumes.append(scratch_volume("scratch", scratch_size))
            container["volumeMounts"].append({"name": "scratch", "mountPath": "/scratch"})
    pod_spec["volumes"] = volumes


def _pool_labels(pool: str) -> dict[str, str]:
    return labels({**contract.DASK_WORKER_LABELS, contract.DASK_POOL_LABEL: pool})


def build_worker_spec(pool: WorkerPoolSpec, image: str, replicas: int | None = None) -> Manifest:
    """The ``worker`` block of a DaskCluster or DaskWorkerGroup for ``pool``: GPU nodes only, hardened."""
    from dask_kubernetes.operator import make_worker_spec  # heavy (kopf, kr8s): only when building

    worker = make_worker_spec(
        image=image,
        n_workers=pool.min_workers if replicas is None else replicas,
        resources=pool.resources.to_manifest(),
        env=_worker_env(),
        worker_command=worker_command(pool.gpus_per_worker),
    )
    pod_spec = worker["spec"]
    _harden(pod_spec, contract.RUNTIME_SERVICE_ACCOUNT.k8s_service_account, pool.scratch_size)
    pod_spec["nodeSelector"] = {
        contract.GPU_NODE_LABEL[0]: contract.GPU_NODE_LABEL[1],
        GKE_ACCELERATOR_LABEL: pool.accelerator_type,
        **pool.node_selector,
    }
    pod_spec["tolerations"] = [gpu_toleration()]
    worker["metadata"] = {"labels": _pool_labels(pool.name)}
    return _mark_template(worker)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:DIGEST_HEX]


def _without_images(pod_spec: Manifest) -> Manifest:
    # The images are compared as they are (pinned by digest); they may also be Pulumi Outputs, which no digest reads.
    return {**pod_spec, "containers": [{k: v for k, v in c.items() if k != "image"} for c in pod_spec["containers"]]}


def template_digest(worker: Manifest) -> str:
    """Digest of a worker template (its pod spec and labels) without its images."""
    return _digest({"spec": _without_images(worker["spec"]), "labels": worker["metadata"].get("labels") or {}})


def _mark_template(worker: Manifest) -> Manifest:
    """Annotate ``worker`` with its template digest; the operator copies it onto every worker Deployment it makes."""
    worker["metadata"]["annotations"] = {contract.DASK_WORKER_TEMPLATE_ANNOTATION: template_digest(worker)}
    return worker


def scheduler_revision(scheduler: Manifest, python: str = "") -> str:
    """What the running Dask scheduler depends on besides its image: the locked Dask version, the image's
    ``python`` version when given, and a digest of its template without the image (a label value: at most 63
    characters)."""
    runtime = f"dask-{version('distributed')}" + (f"-py{python.replace('.', '')}" if python else "")
    return f"{runtime}-{_digest(_without_images(scheduler['spec']))}"


def _fix_scheduler(scheduler: Manifest, resources: Resources, image: str, python: str) -> None:
    pod_spec = scheduler["spec"]
    _harden(pod_spec, service_account=None)
    container = pod_spec["containers"][0]
    # make_cluster_spec copies the workers' resources and image here; the scheduler must hold no GPU, and runs
    # the small CPU image. `command`, not `args`: whatever that image's own default command, this runs.
    container["resources"] = resources.to_manifest()
    container["image"] = image
    # Its large blocks go back to the OS when freed, as in the gpu-scheduler (contract.MALLOC_MMAP_THRESHOLD_BYTES).
    container["env"] = [*_dask_env(), {"name": contract.MALLOC_MMAP_THRESHOLD_ENV,
                                       "value": str(contract.MALLOC_MMAP_THRESHOLD_BYTES)}]
    container.pop("args", None)
    container["command"] = [
        "dask",
        "scheduler",
        "--host",
        "0.0.0.0",
        "--port",
        str(contract.DASK_SCHEDULER_PORT),
        "--dashboard-address",
        f":{contract.DASK_DASHBOARD_PORT}",
    ]
    container["readinessProbe"].update(
        {"periodSeconds": SCHEDULER_READINESS_PERIOD_S, "timeoutSeconds": SCHEDULER_PROBE_TIMEOUT_S}
    )
    container["livenessProbe"]["timeoutSeconds"] = SCHEDULER_PROBE_TIMEOUT_S
    # The scheduler's image is the gpu-scheduler's, whose digest changes with every deploy; the scheduler needs
    # only the Dask in it. The revision names what it does depend on, and only its change replaces the cluster.
    revision = scheduler_revision(scheduler, python)
    scheduler["metadata"] = {"labels": labels({**contract.DASK_SCHEDULER_LABELS,
                                               contract.DASK_SCHEDULER_REVISION_LABEL: revision})}


def build_dask_cluster(spec: DaskClusterSpec) -> Manifest:
    """The DaskCluster: CPU-only scheduler, and the primary pool as the cluster's own worker group."""
    from dask_kubernetes.operator import make_cluster_spec  # heavy (kopf, kr8s): only when building

    primary = spec.primary
    cluster: dict[str, Any] = make_cluster_spec(
        name=spec.name,
        image=spec.image,
        n_workers=primary.min_workers,
        resources=primary.resources.to_manifest(),
        scheduler_service_type="ClusterIP",
    )
    cluster["metadata"] = metadata(spec.name, contract.COMPUTE_NAMESPACE)
    cluster["spec"]["worker"] = build_worker_spec(primary, spec.image)
    _fix_scheduler(cluster["spec"]["scheduler"], spec.scheduler_resources, spec.scheduler_image,
                   spec.scheduler_python)
    return cluster


def cluster_revision(spec: DaskClusterSpec) -> str:
    """The scheduler revision of ``spec``'s DaskCluster (``scheduler_revision``), which its worker groups and
    autoscaler carry too: the operator makes them the cluster's children, so they are replaced with it."""
    return build_dask_cluster(spec)["spec"]["scheduler"]["metadata"]["labels"][contract.DASK_SCHEDULER_REVISION_LABEL]


def _revision_label(spec: DaskClusterSpec) -> dict[str, str]:
    return {contract.DASK_SCHEDULER_REVISION_LABEL: cluster_revision(spec)}


def build_worker_group(spec: DaskClusterSpec, pool: WorkerPoolSpec) -> Manifest:
    """A DaskWorkerGroup ``<cluster>-<pool>`` for a pool other than the primary one."""
    name = worker_group_name(spec.name, pool.name, primary=False)
    # The pool's upper bound, which the gpu-scheduler enforces when it scales the group (no autoscaler does).
    bound = {contract.DASK_MAX_WORKERS_ANNOTATION: str(pool.max_workers)}
    return _worker_group(spec, name, pool.name, build_worker_spec(pool, spec.image), bound)


def cpu_worker_command() -> list[str]:
    """``dask worker`` advertising the CPU resource only: jobs that need no GPU, and no kernel job, run there."""
    return ["dask", "worker", "--nthreads", "1", "--resources", f"{contract.DASK_CPU_RESOURCE}=1",
            "--local-directory", "/scratch", "--preload", contract.DASK_WORKER_PRELOAD]


def build_cpu_worker_group(spec: DaskClusterSpec) -> Manifest:
    """The DaskWorkerGroup ``<cluster>-cpu``: one always-up worker on the system nodes, no GPU.

    A GPU pool scaling from zero takes minutes (a node, its driver, the image), so a job that needs no GPU
    (the post-deploy probe's ``noop``, the drills) would wait as long on an idle platform. This worker runs
    exactly those: the gpu-scheduler sends them with the ``CPU`` resource, and kernel jobs with ``GPU``
    (``GPURT_REQUIRE_GPU``), which this worker does not advertise.
    """
    from dask_kubernetes.operator import make_worker_spec  # heavy (kopf, kr8s): only when building

    worker = make_worker_spec(image=spec.image, n_workers=1, resources=CPU_WORKER_RESOURCES.to_manifest(),
                              env=[*_worker_env(), {"name": contract.SchedulerEnv.DEVICE, "value": "cpu"}],
                              worker_command=cpu_worker_command())
    _harden(worker["spec"], contract.RUNTIME_SERVICE_ACCOUNT.k8s_service_account, CPU_WORKER_SCRATCH_SIZE)
    worker["metadata"] = {"labels": _pool_labels(contract.CPU_POOL)}
    _mark_template(worker)
    name = worker_group_name(spec.name, contract.CPU_POOL, primary=False)
    return _worker_group(spec, name, contract.CPU_POOL, worker, {contract.DASK_MAX_WORKERS_ANNOTATION: "1"})


def _worker_group(spec: DaskClusterSpec, name: str, pool: str, worker: Manifest,
                  annotations: Mapping[str, str]) -> Manifest:
    return {
        "apiVersion": dask_operator.API_VERSION,
        "kind": dask_operator.WORKER_GROUP_KIND,
        "metadata": metadata(name, contract.COMPUTE_NAMESPACE,
                             {**_revision_label(spec), contract.DASK_POOL_LABEL: pool}, annotations),
        "spec": {"cluster": spec.name, "worker": worker},
    }


def build_autoscaler(spec: DaskClusterSpec) -> Manifest:
    """A DaskAutoscaler bounding the primary pool's workers (the operator scales only the default group).

    A queued primary pool gets bounds 0..0: the autoscaler would add workers for Dask's pending work, which no
    ProvisioningRequest covers. The gpu-scheduler pins the bounds to the workers it adds on granted capacity.
    """
    primary = spec.primary
    maximum = 0 if primary.queued else primary.max_workers
    return {
        "apiVersion": dask_operator.API_VERSION,
        "kind": dask_operator.AUTOSCALER_KIND,
        "metadata": metadata(f"{spec.name}{contract.DASK_AUTOSCALER_SUFFIX}", contract.COMPUTE_NAMESPACE,
                             _revision_label(spec)),
        "spec": {"cluster": spec.name, "minimum": primary.min_workers, "maximum": maximum},
    }


def build_scheduler_disruption_budget(spec: DaskClusterSpec) -> Manifest:
    """A PodDisruptionBudget ``<cluster>-scheduler`` refusing voluntary evictions of the single Dask scheduler.

    It holds every task's state in memory: evicting it fails every running job at once. With one replica,
    ``minAvailable: 1`` and ``maxUnavailable: 0`` both allow no eviction at all, and ``maxUnavailable: 1`` allows
    every one (it guards nothing). So: no eviction of a healthy scheduler (the cluster autoscaler never empties its
    node; a GKE node upgrade waits for it up to GKE's limit, then evicts it; a manual drain needs the budget
    removed: docs/runbooks/drain-upgrade.md), but an unready one may always be evicted
    (``unhealthyPodEvictionPolicy: AlwaysAllow``), so a broken scheduler never pins its node.
    (https://kubernetes.io/docs/tasks/run-application/configure-pdb/#think-about-how-your-application-reacts-to-disruptions)
    """
    selector = {dask_operator.CLUSTER_LABEL: spec.name, dask_operator.COMPONENT_LABEL: "scheduler"}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(f"{spec.name}-scheduler", contract.COMPUTE_NAMESPACE),
        "spec": {"maxUnavailable": 0, "unhealthyPodEvictionPolicy": "AlwaysAllow",
                 "selector": {"matchLabels": selector}},
    }


def build_runtime_service_account(gcp_service_account_email: str) -> Manifest:
    """The ``gpu-runtime`` Kubernetes account of the workers, bound to its Google account (Workload Identity)."""
    return workload_identity_service_account(contract.RUNTIME_SERVICE_ACCOUNT, gcp_service_account_email)
