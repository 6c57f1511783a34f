"""The rules every stack obeys, as plain functions over (resource type, name, properties).

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

from manifests import gpu_options
from protocol import contract

SUBSCRIPTION: Final = "gcp:pubsub/subscription:Subscription"
SERVICE_ACCOUNT_KEY: Final = "gcp:serviceaccount/key:Key"
CLUSTER: Final = "gcp:container/cluster:Cluster"
NODE_POOL: Final = "gcp:container/nodePool:NodePool"
# The GKE component records, as its input REPLACE_ACK_INPUT, the GPU node pools a deploy may replace.
GKE_COMPONENT: Final = "gpu-runtime:gke:GkeCluster"
REPLACE_ACK_INPUT: Final = "replaceGpuPools"
DASK_CLUSTER: Final = "kubernetes:kubernetes.dask.org/v1:DaskCluster"
DASK_WORKER_GROUP: Final = "kubernetes:kubernetes.dask.org/v1:DaskWorkerGroup"
DASK_JOB: Final = "kubernetes:kubernetes.dask.org/v1:DaskJob"
GKE_TAINT_EFFECT: Final = "NO_SCHEDULE"  # GKE's spelling of the contract's NoSchedule
WORKLOAD_METADATA_MODE: Final = "GKE_METADATA"

# Where each Kubernetes kind keeps its pod specs (a path of keys from the resource's top level).
_POD_SPEC_PATHS: Final[dict[str, tuple[tuple[str, ...], ...]]] = {
    "kubernetes:apps/v1:Deployment": (("spec", "template"),),
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
class Subject:
    """One resource as a rule sees it."""

    resource_type: str
    name: str
    props: Mapping[str, Any]
    protect: bool = False
    """Pulumi's ``protect`` option: the engine refuses to delete or replace the resource."""
    custom: bool = True
    """A cloud resource, not a component (components carry their inputs for stack rules, nothing more)."""


@dataclass(frozen=True)
class ResourceRule:
    """A rule over one resource at a time."""

    id: str
    description: str
    check: Callable[[Subject], list[str]]


@dataclass(frozen=True)
class StackRule:
    """A rule over the whole stack; violations name the resource they concern."""

    id: str
    description: str
    check: Callable[[Sequence[Subject]], list[tuple[str, str]]]


@dataclass(frozen=True)
class Violation:
    """A failed rule: which rule, which resource, and why."""

    rule: str
    resource: str
    message: str


def _get(props: Mapping[str, Any] | None, *path: str) -> Any:
    """Nested lookup that treats a missing level as absent."""
    value: Any = props
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


# --- Pub/Sub -----------------------------------------------------------------------------------------


def _is_pull(props: Mapping[str, Any]) -> bool:
    # Push, BigQuery and Cloud Storage subscriptions deliver by themselves; only pull subscriptions are read by us.
    return not any(_get(props, key) for key in ("pushConfig", "bigqueryConfig", "cloudStorageConfig"))


def _exempt_from_dead_letter(props: Mapping[str, Any]) -> bool:
    key, value = contract.NO_DEAD_LETTER_LABEL
    return (_get(props, "labels") or {}).get(key) == value


def check_subscription_dead_letter(subject: Subject) -> list[str]:
    """Pull subscriptions dead-letter after 5-100 attempts, unless labelled as deliberately without."""
    if subject.resource_type != SUBSCRIPTION or not _is_pull(subject.props):
        return []
    policy = _get(subject.props, "deadLetterPolicy")
    if not policy:
        if _exempt_from_dead_letter(subject.props):
            return []
        key, value = contract.NO_DEAD_LETTER_LABEL
        return [f"pull subscription has no dead-letter policy (nor the exemption label {key}={value})"]
    low, high = contract.DELIVERY_ATTEMPTS_RANGE
    attempts = _get(policy, "maxDeliveryAttempts")
    problems = []
    if not _is_whole_number(attempts) or not low <= attempts <= high:
        problems.append(f"maxDeliveryAttempts {attempts!r} is outside {low}-{high}")
    if not _get(policy, "deadLetterTopic"):
        problems.append("dead-letter policy names no deadLetterTopic")
    return problems


def _is_whole_number(value: Any) -> bool:
    # Engines pass numbers as doubles (5.0), so "integer" means a whole number here, not a Python int.
    return isinstance(value, int | float) and not isinstance(value, bool) and float(value).is_integer()


def _topic_name(reference: str) -> str:
    """``projects/p/topics/t`` or ``t`` -> ``t``."""
    return reference.rsplit("/", 1)[-1]


def check_dead_letter_topics_subscribed(subjects: Sequence[Subject]) -> list[tuple[str, str]]:
    """Every topic that receives dead letters has a subscription; otherwise dead letters are dropped."""
    subscriptions = [s for s in subjects if s.resource_type == SUBSCRIPTION]
    subscribed = {_topic_name(str(_get(s.props, "topic"))) for s in subscriptions if _get(s.props, "topic")}
    violations = []
    for sub in subscriptions:
        target = _get(sub.props, "deadLetterPolicy", "deadLetterTopic")
        if target and _topic_name(str(target)) not in subscribed:
            violations.append((sub.name, f"dead-letter topic {_topic_name(str(target))} has no subscription"))
    return violations


# --- Identity ----------------------------------------------------------------------------------------


def check_no_service_account_keys(subject: Subject) -> list[str]:
    """No service-account keys: pods use Workload Identity, CI uses Workload Identity Federation."""
    if subject.resource_type == SERVICE_ACCOUNT_KEY:
        return ["service-account keys are forbidden; use Workload Identity"]
    return []


# --- GKE ---------------------------------------------------------------------------------------------


def _is_gpu_pool(props: Mapping[str, Any]) -> bool:
    return bool(_get(props, "nodeConfig", "guestAccelerators"))


def check_gpu_pool_autoscaling_and_taint(subject: Subject) -> list[str]:
    """GPU pools autoscale (from zero allowed) and carry the GPU taint, so only GPU pods land on them."""
    if subject.resource_type != NODE_POOL or not _is_gpu_pool(subject.props):
        return []
    problems = []
    autoscaling = _get(subject.props, "autoscaling")
    max_nodes = _get(autoscaling, "maxNodeCount") or _get(autoscaling, "totalMaxNodeCount")
    if not autoscaling or not max_nodes:
        problems.append("GPU pool does not autoscale (autoscaling with a maxNodeCount is required)")
    taints = _get(subject.props, "nodeConfig", "taints") or []
    wanted = (contract.GPU_TAINT_KEY, contract.GPU_TAINT_VALUE, GKE_TAINT_EFFECT)
    if not any((_get(t, "key"), _get(t, "value"), _get(t, "effect")) == wanted for t in taints):
        problems.append(f"GPU pool lacks the taint {wanted[0]}={wanted[1]}:{contract.GPU_TAINT_EFFECT}")
    return problems


def _pool_options(props: Mapping[str, Any]) -> gpu_options.PoolOptions:
    """A GPU node pool's inputs as the facts GKE's combination rules look at."""
    accelerator = (_get(props, "nodeConfig", "guestAccelerators") or [{}])[0]
    sharing = _get(accelerator, "gpuSharingConfig")
    driver = _get(accelerator, "gpuDriverInstallationConfig", "gpuDriverVersion")
    autoscaling = _get(props, "autoscaling")
    min_nodes = _get(autoscaling, "minNodeCount") or _get(autoscaling, "totalMinNodeCount") or 0
    per_zone = _get(autoscaling, "minNodeCount") is not None or _get(autoscaling, "maxNodeCount") is not None
    reservation = _get(props, "nodeConfig", "reservationAffinity")
    locations = _get(props, "nodeLocations")
    return gpu_options.PoolOptions(
        machine_type=str(_get(props, "nodeConfig", "machineType") or ""),
        accelerator_type=str(_get(accelerator, "type") or ""),
        accelerator_count=int(_get(accelerator, "count") or 1),
        spot=bool(_get(props, "nodeConfig", "spot") or _get(props, "nodeConfig", "preemptible")),
        min_nodes=int(min_nodes),
        managed_driver=bool(driver) and driver != "INSTALLATION_DISABLED",
        sharing_strategy=_get(sharing, "gpuSharingStrategy"),
        max_shared_clients=int(clients) if (clients := _get(sharing, "maxSharedClientsPerGpu")) is not None else None,
        partition_size=_get(accelerator, "gpuPartitionSize") or None,
        queued_provisioning=_get(props, "queuedProvisioning", "enabled") is True,
        # GKE repairs nodes unless told not to.
        auto_repair=_get(props, "management", "autoRepair") is not False,
        reservation_type=_get(reservation, "consumeReservationType"),
        reservation_name=(_get(reservation, "values") or [None])[0],
        compact_placement=_get(props, "placementPolicy", "type") == gpu_options.COMPACT,
        zone_count=len(locations) if isinstance(locations, list) and locations else None,
        flex_start=_get(props, "nodeConfig", "flexStart") is True,
        total_limits=not per_zone,
    )


def check_gpu_pool_options(subject: Subject) -> list[str]:
    """GPU sharing, MIG partitions, queued provisioning, reservations and compact placement combine as GKE allows."""
    if subject.resource_type != NODE_POOL or not _is_gpu_pool(subject.props):
        return []
    return [f"{problem.key}: {problem.message}" for problem in gpu_options.check(_pool_options(subject.props))]


def check_large_gpu_sharing_declared(subject: Subject) -> list[str]:
    """Large GPUs (A100/H100) are time-shared or MPS-shared only where the pool declares it (MIG splits them)."""
    if subject.resource_type != NODE_POOL or not _is_gpu_pool(subject.props):
        return []
    options = _pool_options(subject.props)
    if options.sharing_strategy is None or options.accelerator_type not in gpu_options.LARGE_GPUS:
        return []
    key, value = contract.GPU_SHARING_DECLARED_LABEL
    if (_get(subject.props, "nodeConfig", "resourceLabels") or {}).get(key) == value:
        return []
    return [f"{options.sharing_strategy} on {options.accelerator_type} without the declaration label {key}={value} "
            "(stack config gpuSharing.declared: true)"]


def check_gpu_pools_protected(subjects: Sequence[Subject]) -> list[tuple[str, str]]:
    """In a stack whose cluster has deletion protection, GPU pools are protected, so a replace-on-change edit stops
    the deploy instead of deleting the pool; only pools the stack lists in replaceGpuPools may go unprotected."""
    if not any(s.resource_type == CLUSTER and _get(s.props, "deletionProtection") is True for s in subjects):
        return []
    acknowledged = {name for s in subjects if s.resource_type == GKE_COMPONENT
                    for name in (_get(s.props, REPLACE_ACK_INPUT) or [])}
    return [(s.name, f"GPU node pool {_get(s.props, 'name')} is not protected: a change the provider cannot make "
                     "in place would delete it; list the pool in replaceGpuPools to acknowledge a replacement "
                     "(docs/runbooks/replace-gpu-pool.md)")
            for s in subjects
            if s.resource_type == NODE_POOL and _is_gpu_pool(s.props) and not s.protect
            and _get(s.props, "name") not in acknowledged]


def check_private_nodes_and_workload_identity(subject: Subject) -> list[str]:
    """Clusters have private nodes and a Workload Identity pool; node pools serve the GKE metadata server."""
    props = subject.props
    if subject.resource_type == CLUSTER:
        problems = []
        if _get(props, "privateClusterConfig", "enablePrivateNodes") is not True:
            problems.append("cluster nodes are not private (privateClusterConfig.enablePrivateNodes)")
        if not _get(props, "workloadIdentityConfig", "workloadPool"):
            problems.append("cluster has no Workload Identity pool (workloadIdentityConfig.workloadPool)")
        return problems
    if subject.resource_type == NODE_POOL:
        mode = _get(props, "nodeConfig", "workloadMetadataConfig", "mode")
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
    raw = _get(template, "metadata", "annotations", contract.POLICY_EXCEPTION_ANNOTATION)
    if not isinstance(raw, str):
        return frozenset()
    return frozenset(entry.split(":", 1)[0].strip() for entry in raw.split(";") if ":" in entry)


def _containers(subject: Subject) -> Iterator[_Container]:
    for path in _POD_SPEC_PATHS.get(subject.resource_type, ()):
        template = _get(subject.props, *path) if path else subject.props
        pod_spec = _get(template, "spec")
        if not isinstance(pod_spec, Mapping):
            continue
        excepted = _exceptions(template)
        where = ".".join(path) or "pod"
        for group in ("initContainers", "containers"):
            for container in _get(pod_spec, group) or []:
                label = f"{where}/{_get(container, 'name') or '?'}"
                yield _Container(label, container, pod_spec, excepted)


def check_container_limits(subject: Subject) -> list[str]:
    """Every container declares CPU and memory limits (a runaway pod must not starve the node)."""
    problems = []
    for container in _containers(subject):
        if "containers-resource-limits" in container.excepted:
            continue
        limits = _get(container.spec, "resources", "limits") or {}
        missing = [resource for resource in ("cpu", "memory") if resource not in limits]
        if missing:
            problems.append(f"container {container.where} has no {' or '.join(missing)} limit")
    return problems


def _runs_as_non_root(container: _Container) -> bool:
    own = _get(container.spec, "securityContext") or {}
    pod = _get(container.pod_spec, "securityContext") or {}
    if own.get("runAsUser", pod.get("runAsUser")) == 0:
        return False
    return bool(own.get("runAsNonRoot", pod.get("runAsNonRoot")))


def check_container_non_root(subject: Subject) -> list[str]:
    """Every container runs as non-root (runAsNonRoot, never uid 0), set on the container or its pod."""
    return [
        f"container {container.where} may run as root (set runAsNonRoot: true)"
        for container in _containers(subject)
        if "containers-non-root" not in container.excepted and not _runs_as_non_root(container)
    ]


def check_dask_scheduler_no_gpu(subject: Subject) -> list[str]:
    """The Dask scheduler is CPU-only: a GPU on it is wasted and blocks a worker from scaling up."""
    if subject.resource_type not in (DASK_CLUSTER, DASK_JOB):
        return []
    path = ("spec", "scheduler") if subject.resource_type == DASK_CLUSTER else ("spec", "cluster", "spec", "scheduler")
    problems = []
    for container in _get(subject.props, *path, "spec", "containers") or []:
        resources = _get(container, "resources") or {}
        for kind in ("requests", "limits"):
            if contract.GPU_RESOURCE in (resources.get(kind) or {}):
                problems.append(f"Dask scheduler container {_get(container, 'name')} {kind} {contract.GPU_RESOURCE}")
    return problems


def _resource_rule(rule_id: str, check: Callable[[Subject], list[str]]) -> ResourceRule:
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


def evaluate(subjects: Iterable[Subject]) -> dict[str, list[Violation]]:
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
