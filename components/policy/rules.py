"""The rules every stack obeys, as plain functions over rendered resources (``components.rendered``).

The same functions back the pulumi-policy pack (``pulumi preview --policy-pack components/policy``) and
``gpurt plan``'s offline check, so the two can never disagree. Properties use the engine's camelCase
names, which is what both a policy pack and the Pulumi mock monitor see.

A resource rule returns the violation messages for one resource (empty: compliant). A stack rule sees
every resource at once, for facts that span resources (a dead-letter topic and its subscription).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from components.rendered import CLUSTER, DEPLOYMENT, NODE_POOL, SUBSCRIPTION, Resource, last_segment, lookup
from runtime.manifests import dask_operator, gpu_options
from runtime.protocol import contract

SERVICE_ACCOUNT_KEY: Final = "gcp:serviceaccount/key:Key"
# The GKE component records, as its input REPLACE_ACK_INPUT, the GPU node pools a deploy may replace.
GKE_COMPONENT: Final = "gpu-runtime:gke:GkeCluster"
REPLACE_ACK_INPUT: Final = "replaceGpuPools"
DASK_CLUSTER: Final = f"kubernetes:{dask_operator.API_VERSION}:{dask_operator.CLUSTER_KIND}"
DASK_WORKER_GROUP: Final = f"kubernetes:{dask_operator.API_VERSION}:{dask_operator.WORKER_GROUP_KIND}"
DASK_JOB: Final = f"kubernetes:{dask_operator.API_VERSION}:{dask_operator.JOB_KIND}"
GKE_TAINT_EFFECT: Final = "NO_SCHEDULE"  # GKE's spelling of the contract's NoSchedule
WORKLOAD_METADATA_MODE: Final = "GKE_METADATA"

# Where each Kubernetes kind keeps its pod specs (a path of keys from the resource's top level).
_POD_SPEC_PATHS: Final[dict[str, tuple[tuple[str, ...], ...]]] = {
    DEPLOYMENT: (("spec", "template"),),
    "kubernetes:apps/v1:StatefulSet": (("spec", "template"),),
    "kubernetes:apps/v1:DaemonSet": (("spec", "template"),),
    "kubernetes:apps/v1:ReplicaSet": (("spec", "template"),),
    "kubernetes:batch/v1:Job": (("spec", "template"),),
    "kubernetes:batch/v1:CronJob": (("spec", "jobTemplate", "spec", "template"),),
    "kubernetes:core/v1:Pod": ((),),
    DASK_CLUSTER: (("spec", "scheduler"), ("spec", "worker")),
    DASK_WORKER_GROUP: (("spec", "worker"),),
    DASK_JOB: (("spec", "job"), ("spec", "cluster", "spec", "scheduler"), ("spec", "cluster", "spec", "worker")),
}


@dataclass(frozen=True)
class ResourceRule:
    """A rule over one resource at a time."""

    id: str
    description: str
    check: Callable[[Resource], list[str]]


@dataclass(frozen=True)
class StackRule:
    """A rule over the whole stack; violations name the resource they concern."""

    id: str
    description: str
    check: Callable[[Sequence[Resource]], list[tuple[str, str]]]


@dataclass(frozen=True)
class Violation:
    """A failed rule: which rule, which resource, and why."""

    rule: str
    resource: str
    message: str


# --- Pub/Sub -----------------------------------------------------------------------------------------


def _is_pull(props: Mapping[str, Any]) -> bool:
    # Push, BigQuery and Cloud Storage subscriptions deliver by themselves; only pull subscriptions are read by us.
    return not any(lookup(props, key) for key in ("pushConfig", "bigqueryConfig", "cloudStorageConfig"))


def _exempt_from_dead_letter(props: Mapping[str, Any]) -> bool:
    key, value = contract.NO_DEAD_LETTER_LABEL
    return (lookup(props, "labels") or {}).get(key) == value


def check_subscription_dead_letter(subject: Resource) -> list[str]:
    """Pull subscriptions dead-letter after 5-100 attempts, unless labelled as deliberately without."""
    if subject.type != SUBSCRIPTION or not _is_pull(subject.props):
        return []
    policy = lookup(subject.props, "deadLetterPolicy")
    if not policy:
        if _exempt_from_dead_letter(subject.props):
            return []
        key, value = contract.NO_DEAD_LETTER_LABEL
        return [f"pull subscription has no dead-letter policy (nor the exemption label {key}={value})"]
    low, high = contract.DELIVERY_ATTEMPTS_RANGE
    attempts = lookup(policy, "maxDeliveryAttempts")
    problems = []
    if not _is_whole_number(attempts) or not low <= attempts <= high:
        problems.append(f"maxDeliveryAttempts {attempts!r} is outside {low}-{high}")
    if not lookup(policy, "deadLetterTopic"):
        problems.append("dead-letter policy names no deadLetterTopic")
    return problems


def _is_whole_number(value: Any) -> bool:
    # Engines pass numbers as doubles (5.0), so "integer" means a whole number here, not a Python int.
    return isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer()


def check_dead_letter_topics_subscribed(subjects: Sequence[Resource]) -> list[tuple[str, str]]:
    """Every topic that receives dead letters has a subscription; otherwise dead letters are dropped."""
    subscriptions = [s for s in subjects if s.type == SUBSCRIPTION]
    subscribed = {last_segment(str(lookup(s.props, "topic"))) for s in subscriptions if lookup(s.props, "topic")}
    violations = []
    for sub in subscriptions:
        target = lookup(sub.props, "deadLetterPolicy", "deadLetterTopic")
        if target and last_segment(str(target)) not in subscribed:
            violations.append((sub.name, f"dead-letter topic {last_segment(str(target))} has no subscription"))
    return violations


# --- Identity ----------------------------------------------------------------------------------------


def check_no_service_account_keys(subject: Resource) -> list[str]:
    """No service-account keys: pods use Workload Identity, CI uses Workload Identity Federation."""
    if subject.type == SERVICE_ACCOUNT_KEY:
        return ["service-account keys are forbidden; use Workload Identity"]
    return []


# --- GKE ---------------------------------------------------------------------------------------------


def _is_gpu_pool(props: Mapping[str, Any]) -> bool:
    return bool(lookup(props, "nodeConfig", "guestAccelerators"))


def check_gpu_pool_autoscaling_and_taint(subject: Resource) -> list[str]:
    """GPU pools autoscale (from zero allowed) and carry the GPU taint, so only GPU pods land on them."""
    if subject.type != NODE_POOL or not _is_gpu_pool(subject.props):
        return []
    problems = []
    autoscaling = lookup(subject.props, "autoscaling")
    max_nodes = lookup(autoscaling, "maxNodeCount") or lookup(autoscaling, "totalMaxNodeCount")
    if not autoscaling or not max_nodes:
        problems.append("GPU pool does not autoscale (autoscaling with a maxNodeCount is required)")
    taints = lookup(subject.props, "nodeConfig", "taints") or []
    wanted = (contract.GPU_TAINT_KEY, contract.GPU_TAINT_VALUE, GKE_TAINT_EFFECT)
    if not any((lookup(t, "key"), lookup(t, "value"), lookup(t, "effect")) == wanted for t in taints):
        problems.append(f"GPU pool lacks the taint {wanted[0]}={wanted[1]}:{contract.GPU_TAINT_EFFECT}")
    return problems


def _pool_options(props: Mapping[str, Any]) -> gpu_options.PoolOptions:
    """A GPU node pool's inputs as the facts GKE's combination rules look at."""
    accelerator = (lookup(props, "nodeConfig", "guestAccelerators") or [{}])[0]
    sharing = lookup(accelerator, "gpuSharingConfig")
    driver = lookup(accelerator, "gpuDriverInstallationConfig", "gpuDriverVersion")
    autoscaling = lookup(props, "autoscaling")
    min_nodes = lookup(autoscaling, "minNodeCount") or lookup(autoscaling, "totalMinNodeCount") or 0
    per_zone = lookup(autoscaling, "minNodeCount") is not None or lookup(autoscaling, "maxNodeCount") is not None
    reservation = lookup(props, "nodeConfig", "reservationAffinity")
    locations = lookup(props, "nodeLocations")
    return gpu_options.PoolOptions(
        machine_type=str(lookup(props, "nodeConfig", "machineType") or ""),
        accelerator_type=str(lookup(accelerator, "type") or ""),
        accelerator_count=int(lookup(accelerator, "count") or 1),
        spot=bool(lookup(props, "nodeConfig", "spot") or lookup(props, "nodeConfig", "preemptible")),
        min_nodes=int(min_nodes),
        managed_driver=bool(driver) and driver != "INSTALLATION_DISABLED",
        sharing_strategy=lookup(sharing, "gpuSharingStrategy"),
        max_shared_clients=int(clients) if (clients := lookup(sharing, "maxSharedClientsPerGpu")) is not None else None,
        partition_size=lookup(accelerator, "gpuPartitionSize") or None,
        queued_provisioning=lookup(props, "queuedProvisioning", "enabled") is True,
        # GKE repairs nodes unless told not to.
        auto_repair=lookup(props, "management", "autoRepair") is not False,
        reservation_type=lookup(reservation, "consumeReservationType"),
        reservation_name=(lookup(reservation, "values") or [None])[0],
        compact_placement=lookup(props, "placementPolicy", "type") == gpu_options.COMPACT,
        zone_count=len(locations) if isinstance(locations, list) and locations else None,
        flex_start=lookup(props, "nodeConfig", "flexStart") is True,
        total_limits=not per_zone,
    )


def check_gpu_pool_options(subject: Resource) -> list[str]:
    """GPU sharing, MIG partitions, queued provisioning, reservations and compact placement combine as GKE allows."""
    if subject.type != NODE_POOL or not _is_gpu_pool(subject.props):
        return []
    return [f"{problem.key}: {problem.message}" for problem in gpu_options.check(_pool_options(subject.props))]


def check_large_gpu_sharing_declared(subject: Resource) -> list[str]:
    """Large GPUs (A100/H100) are time-shared or MPS-shared only where the pool declares it (MIG splits them)."""
    if subject.type != NODE_POOL or not _is_gpu_pool(subject.props):
        return []
    options = _pool_options(subject.props)
    if options.sharing_strategy is None or options.accelerator_type not in gpu_options.LARGE_GPUS:
        return []
    key, value = contract.GPU_SHARING_DECLARED_LABEL
    if (lookup(subject.props, "nodeConfig", "resourceLabels") or {}).get(key) == value:
        return []
    return [f"{options.sharing_strategy} on {options.accelerator_type} without the declaration label {key}={value} "
            "(stack config gpuSharing.declared: true)"]


def check_gpu_pools_protected(subjects: Sequence[Resource]) -> list[tuple[str, str]]:
    """In a stack whose cluster has deletion protection, GPU pools are protected, so a replace-on-change edit stops
    the deploy instead of deleting the pool; only pools the stack lists in replaceGpuPools may go unprotected."""
    if not any(s.type == CLUSTER and lookup(s.props, "deletionProtection") is True for s in subjects):
        return []
    acknowledged = {name for s in subjects if s.type == GKE_COMPONENT
                    for name in (lookup(s.props, REPLACE_ACK_INPUT) or [])}
    return [(s.name, f"GPU node pool {lookup(s.props, 'name')} is not protected: a change the provider cannot make "
                     "in place would delete it; list the pool in replaceGpuPools to acknowledge a replacement "
                     "(docs/runbooks/replace-gpu-pool.md)")
            for s in subjects
            if s.type == NODE_POOL and _is_gpu_pool(s.props) and not s.protect
            and lookup(s.props, "name") not in acknowledged]


def check_private_nodes_and_workload_identity(subject: Resource) -> list[str]:
    """Clusters have private nodes and a Workload Identity pool; node pools serve the GKE metadata server."""
    props = subject.props
    if subject.type == CLUSTER:
        problems = []
        if lookup(props, "privateClusterConfig", "enablePrivateNodes") is not True:
            problems.append("cluster nodes are not private (privateClusterConfig.enablePrivateNodes)")
        if not lookup(props, "workloadIdentityConfig", "workloadPool"):
            problems.append("cluster has no Workload Identity pool (workloadIdentityConfig.workloadPool)")
        return problems
    if subject.type == NODE_POOL:
        mode = lookup(props, "nodeConfig", "workloadMetadataConfig", "mode")
        if mode != WORKLOAD_METADATA_MODE:
            return [f"node pool workloadMetadataConfig.mode is {mode!r}, not {WORKLOAD_METADATA_MODE}"]
    return []


# --- Kubernetes workloads ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Container:
    where: str
    spec: Mapping[str, Any]
    pod_spec: Mapping[str, Any]
    excepted: frozenset[str]


def _exceptions(template: Mapping[str, Any]) -> frozenset[str]:
    """Rule ids a pod template is excepted from: ``rule-id: reason`` entries separated by ';'."""
    raw = lookup(template, "metadata", "annotations", contract.POLICY_EXCEPTION_ANNOTATION)
    if not isinstance(raw, str):
        return frozenset()
    return frozenset(entry.split(":", 1)[0].strip() for entry in raw.split(";") if ":" in entry)


def _containers(subject: Resource) -> Iterator[_Container]:
    for path in _POD_SPEC_PATHS.get(subject.type, ()):
        template = lookup(subject.props, *path) if path else subject.props
        pod_spec = lookup(template, "spec")
        if not isinstance(pod_spec, Mapping):
            continue
        excepted = _exceptions(template)
        where = ".".join(path) or "pod"
        for group in ("initContainers", "containers"):
            for container in lookup(pod_spec, group) or []:
                label = f"{where}/{lookup(container, 'name') or '?'}"
                yield _Container(label, container, pod_spec, excepted)


def check_container_limits(subject: Resource) -> list[str]:
    """Every container declares CPU and memory limits (a runaway pod must not starve the node)."""
    problems = []
    for container in _containers(subject):
        if "containers-resource-limits" in container.excepted:
            continue
        limits = lookup(container.spec, "resources", "limits") or {}
        missing = [resource for resource in ("cpu", "memory") if resource not in limits]
        if missing:
            problems.append(f"container {container.where} has no {' or '.join(missing)} limit")
    return problems


def _runs_as_non_root(container: _Container) -> bool:
    own = lookup(container.spec, "securityContext") or {}
    pod = lookup(container.pod_spec, "securityContext") or {}
    if own.get("runAsUser", pod.get("runAsUser")) == 0:
        return False
    return bool(own.get("runAsNonRoot", pod.get("runAsNonRoot")))


def check_container_non_root(subject: Resource) -> list[str]:
    """Every container runs as non-root (runAsNonRoot, never uid 0), set on the container or its pod."""
    return [
        f"container {container.where} may run as root (set runAsNonRoot: true)"
        for container in _containers(subject)
        if "containers-non-root" not in container.excepted and not _runs_as_non_root(container)
    ]


def check_dask_scheduler_no_gpu(subject: Resource) -> list[str]:
    """The Dask scheduler is CPU-only: a GPU on it is wasted and blocks a worker from scaling up."""
    if subject.type not in (DASK_CLUSTER, DASK_JOB):
        return []
    path = ("spec", "scheduler") if subject.type == DASK_CLUSTER else ("spec", "cluster", "spec", "scheduler")
    problems = []
    for container in lookup(subject.props, *path, "spec", "containers") or []:
        resources = lookup(container, "resources") or {}
        for kind in ("requests", "limits"):
            if contract.GPU_RESOURCE in (resources.get(kind) or {}):
                problems.append(f"Dask scheduler container {lookup(container, 'name')} {kind} {contract.GPU_RESOURCE}")
    return problems


def _resource_rule(rule_id: str, check: Callable[[Resource], list[str]]) -> ResourceRule:
    return ResourceRule(rule_id, inspect.getdoc(check) or rule_id, check)


RESOURCE_RULES: Final = (
    _resource_rule("pubsub-dead-letter", check_subscription_dead_letter),
    _resource_rule("no-service-account-keys", check_no_service_account_keys),
    _resource_rule("gpu-pools-autoscale-tainted", check_gpu_pool_autoscaling_and_taint),
    _resource_rule("gke-private-workload-identity", check_private_nodes_and_workload_identity),
    _resource_rule("gpu-pool-options", check_gpu_pool_options),
    _resource_rule("gpu-sharing-declared", check_large_gpu_sharing_declared),
    _resource_rule("containers-resource-limits", check_container_limits),
    _resource_rule("containers-non-root", check_container_non_root),
    _resource_rule("dask-scheduler-no-gpu", check_dask_scheduler_no_gpu),
)
STACK_RULES: Final = (
    StackRule(
        "dead-letter-topics-subscribed",
        inspect.getdoc(check_dead_letter_topics_subscribed) or "",
        check_dead_letter_topics_subscribed,
    ),
    StackRule("gpu-pools-protected", inspect.getdoc(check_gpu_pools_protected) or "", check_gpu_pools_protected),
)


def evaluate(subjects: Iterable[Resource]) -> dict[str, list[Violation]]:
    """Run every rule; the result maps each rule id to its violations (an empty list means it passed)."""
    subjects = list(subjects)
    results: dict[str, list[Violation]] = {}
    for rule in RESOURCE_RULES:
        results[rule.id] = [
            Violation(rule.id, subject.name, message) for subject in subjects for message in rule.check(subject)
        ]
    for stack_rule in STACK_RULES:
        results[stack_rule.id] = [
            Violation(stack_rule.id, resource, message) for resource, message in stack_rule.check(subjects)
        ]
    return results
