"""The gpu-scheduler workload in namespace ``gpu-runtime``: identity, RBAC, Deployment, Service, PDB, Secret.

The settings the service reads are named by ``contract.SchedulerEnv`` (which ``runtime/scheduler/settings.py``
reads); the names of everything else come from ``runtime.protocol.contract`` too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, TypeVar

from runtime.manifests import dask_operator
from runtime.manifests.common import (
    Manifest,
    Resources,
    container_security_context,
    metadata,
    pod_security_context,
    scratch_volume,
    workload_identity_service_account,
)
from runtime.protocol import contract, queues
from runtime.protocol.contract import SchedulerEnv
from runtime.protocol.queues import BUILT_IN_QUEUES, QueueSpec

# Seconds a terminating pod keeps running. The preStop hook switches the replica to drain at once, so no
# new message is pulled; in-flight jobs then have this long to finish and publish. Short jobs (the bulk)
# finish; a longer one is simply not acked and Pub/Sub redelivers it to another replica, where the
# result store makes the rerun idempotent. Waiting out the 600 s ack deadline instead would stall every
# rolling update for ten minutes per pod.
TERMINATION_GRACE_S: Final = 120
# Startup may include connecting to Dask and opening the streaming pull; the contract allows two minutes
# for a pod to come up, so the startup probe gives up exactly then.
STARTUP_PERIOD_S: Final = 5
STARTUP_FAILURES: Final = contract.POD_READY_TIMEOUT_S // STARTUP_PERIOD_S
LIVENESS_PERIOD_S: Final = 10
READINESS_PERIOD_S: Final = 5
PROBE_TIMEOUT_S: Final = 3
# Replicas share the subscription, so one may be down at a time during voluntary disruptions.
PDB_MAX_UNAVAILABLE: Final = 1
PORT_NAME: Final = "http"
# The kubelet probes this port, the probes' own listener (runtime/scheduler/probe_listener.py): a client that
# fills the API's connection cap cannot fail them. Neither the Service nor any NetworkPolicy exposes it; the
# kubelet reaches it from the node, which NetworkPolicy always admits (runtime/manifests/network.py).
PROBE_PORT_NAME: Final = "probes"
TMP_SIZE: Final = "256Mi"
# The control token reaches the container as a file of the Secret, never as an environment variable: a
# process's environment is inherited by every child it starts and shown by tools that dump it.
TOKEN_VOLUME: Final = "control-token"
TOKEN_DIR: Final = "/var/run/secrets/gpu-runtime"
TOKEN_FILE: Final = f"{TOKEN_DIR}/{contract.CONTROL_TOKEN_SECRET_KEY}"
# Owner and group may read (the group is the pod's fsGroup, the container's own user); no one else.
TOKEN_FILE_MODE: Final = 0o440
DEFAULT_RESOURCES: Final = Resources(cpu_request="500m", memory_request="1Gi", cpu_limit="2", memory_limit="2Gi")

# The preStop hook: ask this replica to drain through its own control API (stdlib only, so any image with
# the runtime can run it). The kubelet ignores its exit status, and SIGTERM still drains if the call fails.
_DRAIN_SCRIPT: Final = (
    "import os, urllib.request as r\n"
    "token = open(os.environ['{token_file_env}']).read().strip()\n"
    "req = r.Request('http://127.0.0.1:{port}/control/maintenance', data=b'{{\"mode\": \"drain\"}}',\n"
    "    method='POST', headers={{'Authorization': 'Bearer ' + token,\n"
    "    'Content-Type': 'application/json'}})\n"
    "r.urlopen(req, timeout=5)\n"
)


def drain_command(port: int = contract.SCHEDULER_PORT) -> list[str]:
    """The preStop command that switches the replica listening on ``port`` to drain mode."""
    return ["python", "-c", _DRAIN_SCRIPT.format(port=port, token_file_env=SchedulerEnv.CONTROL_TOKEN_FILE)]


T = TypeVar("T")


@dataclass(frozen=True)
class VertexRouting:
    """What the scheduler sends to Vertex AI custom jobs (pinned job types, overflow), and how those jobs run.

    Given, the scheduler makes Vertex AI calls and the stack grants what they need; absent, it makes none
    and the stack grants nothing for them (``contract.ScopedGrant.vertex_only``).
    """

    job_types: tuple[str, ...]
    """Job types routed there (``GPURT_VERTEX_TYPES``); the rest run on Dask."""
    service_account: str
    """Google account the jobs run as (``gpu-runtime``), which the scheduler must be allowed to act as."""
    image: str
    """Image the jobs run: the Dask GPU worker image, which has the kernels."""
    region: str
    machine_type: str
    accelerator: str
    accelerator_count: int = 1
    spill_after_s: float | None = None
    """Overflow: seconds a job may wait for a Dask worker before it spills (``GPURT_VERTEX_SPILL_AFTER_S``)."""

    def settings(self) -> dict[str, str]:
        """The scheduler's ``GPURT_VERTEX_*`` settings for this routing."""
        # Written as the scheduler reads it back (a float), so the settings check sees the same value.
        overflow = {SchedulerEnv.VERTEX_SPILL_AFTER_S: str(float(self.spill_after_s))} if self.spill_after_s else {}
        return {
            **overflow,
            SchedulerEnv.VERTEX_TYPES: ",".join(self.job_types),
            SchedulerEnv.VERTEX_SERVICE_ACCOUNT: self.service_account,
            SchedulerEnv.VERTEX_IMAGE: self.image,
            SchedulerEnv.VERTEX_REGION: self.region,
            SchedulerEnv.VERTEX_MACHINE_TYPE: self.machine_type,
            SchedulerEnv.VERTEX_ACCELERATOR: self.accelerator,
            SchedulerEnv.VERTEX_ACCELERATOR_COUNT: str(self.accelerator_count),
        }


@dataclass(frozen=True)
class SchedulerSpec:
    """What varies per stack for the gpu-scheduler Deployment."""

    project: str
    """GCP project the service publishes to and consumes from (``GPURT_PROJECT``)."""
    image: str
    """Scheduler image reference, ideally pinned by tag or digest."""
    result_store: str
    """fsspec URL of the result store, e.g. ``gs://<bucket>/results`` (``GPURT_RESULT_STORE``)."""
    replicas: int = 2
    """Every replica consumes; only the Lease holder runs the singletons."""
    resources: Resources = DEFAULT_RESOURCES
    """Container requests and limits."""
    extra_env: Mapping[str, str] = field(default_factory=dict)
    """Further ``GPURT_*`` settings (e.g. ``GPURT_LOG_LEVEL``, Vertex routing); they override the defaults."""
    vertex: VertexRouting | None = None
    """Job types routed to Vertex AI; None: every job runs on Dask and no Vertex AI call is made."""
    queued_pools: Mapping[str, int | None] = field(default_factory=dict)
    """Pools with queued provisioning, each with its requests' maxRunDurationSeconds (None: GKE's default);
    the scheduler creates ProvisioningRequests for their workers (``GPURT_QUEUED_POOLS``)."""
    queues: tuple[QueueSpec, ...] = BUILT_IN_QUEUES
    """The request queues the scheduler consumes, with their weights and caps (``GPURT_QUEUES``)."""

    def __post_init__(self) -> None:
        # The scheduler ignores variables it does not read, so a misspelt setting would change nothing, silently.
        unknown = sorted(set(self.extra_env) - contract.SCHEDULER_ENV_NAMES)
        if unknown:
            raise ValueError(f"extra_env: {', '.join(unknown)} is not a setting the gpu-scheduler reads "
                             "(contract.SchedulerEnv, docs/scheduler.md)")


def queued_pools_setting(queued_pools: Mapping[str, int | None]) -> str:
    """``GPURT_QUEUED_POOLS``: ``pool`` or ``pool=maxRunDurationSeconds``, comma-separated, in pool order."""
    return ",".join(pool if seconds is None else f"{pool}={seconds}" for pool, seconds in queued_pools.items())


def build_service_account(gcp_service_account_email: str) -> Manifest:
    """The ``gpu-scheduler`` Kubernetes account, bound to its Google account through Workload Identity."""
    return workload_identity_service_account(contract.SCHEDULER_SERVICE_ACCOUNT, gcp_service_account_email)


def build_control_token_secret(token: T) -> Manifest:
    """The Secret holding the control-API bearer token.

    ``token`` is the plain value here and in tests; the Pulumi component passes its secret Output, which
    stays encrypted in state.
    """
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(contract.CONTROL_TOKEN_SECRET, contract.RUNTIME_NAMESPACE),
        "type": "Opaque",
        "stringData": {contract.CONTROL_TOKEN_SECRET_KEY: token},
    }


def _role(name: str, namespace: str, rules: list[Manifest]) -> Manifest:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": metadata(name, namespace),
        "rules": rules,
    }


def _role_binding(name: str, namespace: str) -> Manifest:
    account = contract.SCHEDULER_SERVICE_ACCOUNT
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": metadata(name, namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [
            {"kind": "ServiceAccount", "name": account.k8s_service_account, "namespace": account.k8s_namespace}
        ],
    }


# What the scheduler needs in ``compute`` for a queued pool: it creates each ProvisioningRequest with its
# PodTemplate, lists them every reconcile round (conditions), deletes those that failed or are no longer
# needed; it lists the worker Deployments the operator made (which request each consumes) and deletes those
# whose capacity GKE revoked, whose pods could never be placed again.
PROVISIONING_RULES: Final = (
    {"apiGroups": ["autoscaling.x-k8s.io"], "resources": ["provisioningrequests"],
     "verbs": ["create", "list", "delete"]},
    {"apiGroups": [""], "resources": ["podtemplates"], "verbs": ["create", "list", "delete"]},
)


def build_rbac(
    compute_namespace: str = contract.COMPUTE_NAMESPACE, queued_provisioning: bool = False
) -> list[Manifest]:
    """Least-privilege RBAC: Leases in its own namespace, and scaling Dask worker groups in ``compute``.

    ``create`` on leases cannot be limited by name (the object does not exist yet); get/update can, so
    the scheduler can touch no other Lease. Exactly the verbs the code calls (``components.review.cloud_calls``):
    the lease is read and replaced, worker groups are listed and patched, never fetched one by one; the
    DaskCluster is listed and worker Deployments listed and deleted to roll workers onto a new template. Only a
    stack with a queued pool (``queued_provisioning``) grants ``PROVISIONING_RULES`` as well: names of the
    requests and templates are generated, so those rules cannot name them.
    """
    leader = f"{contract.SCHEDULER_DEPLOYMENT}-leader-election"
    pools = f"{contract.SCHEDULER_DEPLOYMENT}-pools"
    lease_rules = [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [contract.LEADER_LEASE_NAME],
            "verbs": ["get", "update"],
        },
        # The maintenance mode every replica follows (runtime.scheduler.maintenance): the deploy creates it.
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [contract.MAINTENANCE_CONFIGMAP],
         "verbs": ["get", "patch"]},
    ]
    pool_rules = [
        {
            "apiGroups": [dask_operator.GROUP],
            "resources": [dask_operator.WORKER_GROUP_PLURAL],
            "verbs": ["list", "patch"],
        },
        {
            # Scaling the primary pool pins the autoscaler's bounds; nothing else of it is touched.
            "apiGroups": [dask_operator.GROUP],
            "resources": [dask_operator.AUTOSCALER_PLURAL],
            "resourceNames": [f"{contract.DASK_CLUSTER_NAME}{contract.DASK_AUTOSCALER_SUFFIX}"],
            "verbs": ["patch"],
        },
        # Rolling workers onto a new template (runtime.scheduler.pools.rollout): the DaskCluster's worker template
        # for the operator's default group, and the worker Deployments it retires (their names are generated).
        {"apiGroups": [dask_operator.GROUP], "resources": [dask_operator.CLUSTER_PLURAL], "verbs": ["list"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list", "delete"]},
    ]
    if queued_provisioning:
        pool_rules += [{**rule, "verbs": list(rule["verbs"])} for rule in PROVISIONING_RULES]
    return [
        _role(leader, contract.RUNTIME_NAMESPACE, lease_rules),
        _role_binding(leader, contract.RUNTIME_NAMESPACE),
        _role(pools, compute_namespace, pool_rules),
        _role_binding(pools, compute_namespace),
    ]


def _env(spec: SchedulerSpec) -> list[Manifest]:
    plain = {
        SchedulerEnv.PROJECT: spec.project,
        SchedulerEnv.DASK_SCHEDULER: contract.DASK_SCHEDULER_ADDRESS,
        SchedulerEnv.RESULT_STORE: spec.result_store,
        SchedulerEnv.POOLS: "kubernetes",
        SchedulerEnv.REQUIRE_GPU: "true",
        SchedulerEnv.LEADER: "kubernetes",
        SchedulerEnv.HOST: "0.0.0.0",
        SchedulerEnv.PORT: str(contract.SCHEDULER_PORT),
        SchedulerEnv.PROBE_PORT: str(contract.SCHEDULER_PROBE_PORT),
        SchedulerEnv.CONTROL_TOKEN_FILE: TOKEN_FILE,
    }
    if spec.vertex is not None:
        plain.update(spec.vertex.settings())
    if spec.queued_pools:
        plain[SchedulerEnv.QUEUED_POOLS] = queued_pools_setting(spec.queued_pools)
    plain[SchedulerEnv.QUEUES] = queues.encode(spec.queues)
    plain.update(spec.extra_env)
    env: list[Manifest] = [{"name": key, "value": value} for key, value in plain.items()]
    env += [
        {"name": SchedulerEnv.POD_NAME, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": SchedulerEnv.POD_NAMESPACE, "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]
    return env


def _probe(path: str, period_s: int, failures: int) -> Manifest:
    return {
        "httpGet": {"path": path, "port": PROBE_PORT_NAME},
        "periodSeconds": period_s,
        "timeoutSeconds": PROBE_TIMEOUT_S,
        "failureThreshold": failures,
    }


def _spread(topology_key: str) -> Manifest:
    return {
        "maxSkew": 1,
        "topologyKey": topology_key,
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": dict(contract.SCHEDULER_LABELS)},
    }


def _token_volume() -> Manifest:
    return {"name": TOKEN_VOLUME, "secret": {
        "secretName": contract.CONTROL_TOKEN_SECRET, "defaultMode": TOKEN_FILE_MODE,
        "items": [{"key": contract.CONTROL_TOKEN_SECRET_KEY, "path": contract.CONTROL_TOKEN_SECRET_KEY}]}}


def build_deployment(spec: SchedulerSpec) -> Manifest:
    """The ``gpu-scheduler`` Deployment: hardened, probed, spread over zones, drained before it stops."""
    pod_labels = {**contract.COMMON_LABELS, **contract.SCHEDULER_LABELS}
    container = {
        "name": contract.SCHEDULER_DEPLOYMENT,
        "image": spec.image,
        "command": ["python", "-m", "runtime.scheduler"],
        "ports": [{"name": PORT_NAME, "containerPort": contract.SCHEDULER_PORT, "protocol": "TCP"},
                  {"name": PROBE_PORT_NAME, "containerPort": contract.SCHEDULER_PROBE_PORT, "protocol": "TCP"}],
        "env": _env(spec),
        "resources": spec.resources.to_manifest(),
        "securityContext": container_security_context(),
        "startupProbe": _probe(contract.HEALTH_PATH, STARTUP_PERIOD_S, STARTUP_FAILURES),
        "livenessProbe": _probe(contract.HEALTH_PATH, LIVENESS_PERIOD_S, 3),
        "readinessProbe": _probe(contract.READY_PATH, READINESS_PERIOD_S, 2),
        "lifecycle": {"preStop": {"exec": {"command": drain_command()}}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"},
                         {"name": TOKEN_VOLUME, "mountPath": TOKEN_DIR, "readOnly": True}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(contract.SCHEDULER_DEPLOYMENT, contract.RUNTIME_NAMESPACE, contract.SCHEDULER_LABELS),
        "spec": {
            "replicas": spec.replicas,
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": dict(contract.SCHEDULER_LABELS)},
            # Never drop below the desired count: a new pod must be Ready before an old one drains.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "serviceAccountName": contract.SCHEDULER_SERVICE_ACCOUNT.k8s_service_account,
                    "securityContext": pod_security_context(),
                    "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
                    "topologySpreadConstraints": [
                        _spread("topology.kubernetes.io/zone"),
                        _spread("kubernetes.io/hostname"),
                    ],
                    "containers": [container],
                    "volumes": [scratch_volume("tmp", TMP_SIZE), _token_volume()],
                },
            },
        },
    }


def build_service() -> Manifest:
    """ClusterIP Service on the contract port; its name is the in-cluster host of ``contract.SCHEDULER_URL``."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(contract.SCHEDULER_DEPLOYMENT, contract.RUNTIME_NAMESPACE, contract.SCHEDULER_LABELS),
        "spec": {
            "type": "ClusterIP",
            "selector": dict(contract.SCHEDULER_LABELS),
            "ports": [
                {"name": PORT_NAME, "port": contract.SCHEDULER_PORT, "targetPort": PORT_NAME, "protocol": "TCP"}
            ],
        },
    }


def build_maintenance_config_map() -> Manifest:
    """The ConfigMap holding the maintenance mode every scheduler replica follows, created empty: the replicas
    write its data (the component ignores changes to it, so a deploy never resets a drain)."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(contract.MAINTENANCE_CONFIGMAP, contract.RUNTIME_NAMESPACE, contract.SCHEDULER_LABELS)}


def build_pod_disruption_budget() -> Manifest:
    """Node drains and upgrades evict at most one scheduler replica at a time."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(contract.SCHEDULER_DEPLOYMENT, contract.RUNTIME_NAMESPACE, contract.SCHEDULER_LABELS),
        "spec": {
            "maxUnavailable": PDB_MAX_UNAVAILABLE,
            "selector": {"matchLabels": dict(contract.SCHEDULER_LABELS)},
        },
    }
