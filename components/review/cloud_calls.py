"""Every cloud call the platform's workloads make, and the IAM permission or RBAC verb each one needs.

One registry, next to the contract: each entry names the code that makes the call (``site``: module and
function, and the client method it calls there), which workload's identity makes it, and what that
identity must hold, on which resource. ``components.review.iam_proof`` proves from a rendered stack that every
need is granted and that every grant is needed; the tests check that each ``site`` really makes its call
and that no module of the scheduler image calls a cloud client that is not declared here.

Workloads and their identities (resolved from the stack, never assumed):
- ``SCHEDULER``: the gpu-scheduler pods — the Google account their Kubernetes service account is bound to
  through Workload Identity, and that Kubernetes account itself for Kubernetes API calls;
- ``VERTEX_TASK``: Vertex AI custom jobs — the Google account the scheduler names for them
  (``GPURT_VERTEX_SERVICE_ACCOUNT`` of its Deployment);
- ``OPERATOR``: the ``gpurt`` tools a person or CI runs with their own credentials (submit, DLQ replay,
  drills). The stack grants them nothing, so the proof leaves them out; they are declared so that the
  shared modules' calls are all accounted for, and so the docs can say what such an identity needs.

The code making the calls sits above this package, which cannot import it, so it is named by string
(``module:Qualified.function``). Every such string is in this module and nowhere else (the sites below,
``CLIENT_SITES``, ``NO_CLIENT_CALLS``, ``CALLER_PACKAGES``), so moving a package is one substitution here;
``tests/components/test_iam_proof.py`` resolves each to a function of its module that makes the declared
call, so a rename or a moved call fails the tests instead of leaving a declaration that points at nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

from runtime.manifests import dask_operator
from runtime.protocol import contract
from runtime.protocol.queues import QueueSpec


class Workload(StrEnum):
    """Code running under one identity."""

    SCHEDULER = "gpu-scheduler"
    VERTEX_TASK = "vertex-task"
    OPERATOR = "operator"


# The workloads whose identities the stack itself creates and grants.
STACK_WORKLOADS: Final = frozenset({Workload.SCHEDULER, Workload.VERTEX_TASK})


class Target(StrEnum):
    """Kinds of GCP resource a permission is checked on; a project-level grant covers every one."""

    PROJECT = "project"
    RESULT_BUCKET = "result-bucket"
    TOPIC = "topic"
    SUBSCRIPTION = "subscription"
    SERVICE_ACCOUNT = "service-account"
    REGISTRY = "registry"


@dataclass(frozen=True)
class Switch:
    """Settings of the scheduler's Deployment under which the code makes a call: any one given turns it on.

    Each entry is ``(setting, value)``: ``value`` None means any non-empty value. A stack whose scheduler
    gives none of them makes the call never, so it needs, and must grant, nothing for it.
    """

    settings: tuple[tuple[str, str | None], ...]

    def on(self, env: Mapping[str, str]) -> bool:
        """Whether the Deployment's settings ``env`` turn the calls on."""
        return any(env.get(name) if value is None else env.get(name) == value for name, value in self.settings)

    def __str__(self) -> str:
        return " and ".join(f"{name} is not set" if value is None else f"{name} is not {value}"
                            for name, value in self.settings)


QUEUED_POOLS: Final = Switch(((contract.SchedulerEnv.QUEUED_POOLS, None),))
VERTEX_AI: Final = Switch(((contract.SchedulerEnv.VERTEX_TYPES, None),
                           (contract.SchedulerEnv.VERTEX_SPILL_AFTER_S, None),
                           (contract.SchedulerEnv.BACKEND, contract.VERTEX_BACKEND)))


@dataclass(frozen=True)
class GcpCall:
    """A Google API call: ``permissions`` must all hold on ``target`` (``name``: which topic, account...)."""

    site: str
    """``module:Qualified.function`` that makes the call."""
    method: str
    """The client method called there (``list_time_series``, ``pipe_file``...)."""
    workload: Workload
    permissions: tuple[str, ...]
    target: Target
    name: str = ""
    why: str = ""
    only_with: Switch | None = None
    """The calls are made only when the scheduler's settings turn this on (Vertex AI routing)."""
    per_queue: bool = False
    """Made on every request queue's subscription (``name`` left empty): the built-in queues' and each desk's that
    the scheduler's Deployment declares (``GPURT_QUEUES``); ``for_queues`` names them."""

    def for_queues(self, queues: Sequence[QueueSpec]) -> tuple[GcpCall, ...]:
        """This call as it is made on ``queues``: one per queue subscription if ``per_queue``, else itself."""
        if not self.per_queue:
            return (self,)
        return tuple(replace(self, name=queue.subscription, per_queue=False,
                             why=f"{self.why} of queue {queue.name}") for queue in queues)


@dataclass(frozen=True)
class KubeCall:
    """A Kubernetes API call: ``verb`` on ``resource`` of ``api_group`` in ``namespace`` (``name``: the object).

    ``only_with``: the code makes the call only when the scheduler's Deployment turns this on, so a stack
    that does not needs, and must grant, nothing for the call.
    """

    site: str
    method: str
    workload: Workload
    api_group: str
    resource: str
    verb: str
    namespace: str
    name: str | None = None
    only_with: Switch | None = None


_S = Workload.SCHEDULER
_LEASES = ("coordination.k8s.io", "leases")
_POOLS = "runtime.scheduler.pools.kubernetes:KubernetesPools"
_QUEUED = "runtime.scheduler.pools.queued:QueuedProvisioner"
_ROLLOUT = "runtime.scheduler.pools.rollout:WorkerRollout"
_PROVREQS = ("autoscaling.x-k8s.io", "provisioningrequests")
_STORE = "runtime.scheduler.store.store:ResultStore"
# gcsfs's default filesystem first asks the Storage Control API for the bucket's layout (flat or
# hierarchical), which needs storage.objects.list; every gs:// access below starts with it.
_LAYOUT = "storage.objects.list"
_GET = ("storage.objects.get", _LAYOUT)
# Replacing an existing object needs delete as well as create (results are rewritten on a retried job).
_WRITE = ("storage.objects.create", "storage.objects.delete", _LAYOUT)
_DELETE = ("storage.objects.delete", _LAYOUT)
# gcsfs answers `exists` from a GET of the object and, when that misses, a listing of the prefix.
_EXISTS = ("storage.objects.get", _LAYOUT)
_CONSUME = ("pubsub.subscriptions.consume",)
# Who waits for results on a private subscription of its own.
_RESULTS_WAIT = "gpurt submit --wait, the Python client"
_ADMIN = "validation.adapters.pubsub:GooglePubSubAdmin"
_KUBE = "validation.adapters.kube:KubernetesApi"
_APPS = "validation.rollback.kubernetes:KubernetesDeploymentApi"
_VERTEX = "runtime.scheduler.backends.vertex:VertexBackend"

GCP_CALLS: Final = (
    GcpCall("runtime.scheduler.consumer:Consumer._open", "subscribe", _S, _CONSUME, Target.SUBSCRIPTION,
            why="streaming pull of job requests (pull, ack, modify deadline)", per_queue=True),
    GcpCall("runtime.scheduler.consumer:Consumer._open", "subscribe", _S, _CONSUME, Target.SUBSCRIPTION,
            contract.PROBE_SUBSCRIPTION, "streaming pull of the deploy probe, apart from the request backlog"),
    GcpCall("runtime.scheduler.reclaimer:DlqReclaimer.run", "pull", _S, _CONSUME, Target.SUBSCRIPTION,
            contract.REQUEST_DLQ_SUBSCRIPTION, "reads dead letters to publish their terminal result"),
    GcpCall("runtime.scheduler.reclaimer:DlqReclaimer.run", "modify_ack_deadline", _S, _CONSUME,
            Target.SUBSCRIPTION, contract.REQUEST_DLQ_SUBSCRIPTION, "releases a dead letter without acking it"),
    GcpCall("runtime.pubsub.publisher:ResultPublisher.publish_results", "publish", _S,
            ("pubsub.topics.publish",), Target.TOPIC, contract.RESULT_TOPIC, "publishes results"),
    GcpCall("runtime.pubsub.publisher:TopicPublisher._publish", "publish", Workload.OPERATOR,
            ("pubsub.topics.publish",), Target.TOPIC, contract.REQUEST_TOPIC, "submits, replays and probes jobs"),
    GcpCall("runtime.pubsub.publisher:TopicPublisher.publish_raw_requests", "publish", Workload.OPERATOR,
            ("pubsub.topics.publish",), Target.TOPIC, contract.REQUEST_TOPIC, "submits jobs in bulk (drills)"),
    GcpCall("runtime.scheduler.messaging.depth:MonitoringDepth.undelivered", "list_time_series", _S,
            ("monitoring.timeSeries.list",), Target.PROJECT, why="backlog and dead-letter depth"),
    GcpCall(f"{_STORE}._read", "open", _S, _GET, Target.RESULT_BUCKET, why="stored results and artifacts"),
    GcpCall(f"{_STORE}._exists", "exists", _S, _EXISTS, Target.RESULT_BUCKET, why="published and cancel markers"),
    GcpCall(f"{_STORE}._write_in", "pipe_file", _S, _WRITE, Target.RESULT_BUCKET,
            why="results, artifacts, markers"),
    # On gs:// these two ask nothing of the service: gcsfs has no folders, and uploads are atomic so nothing
    # is staged and renamed (only file:// stores are).
    GcpCall(f"{_STORE}._write_in", "makedirs", _S, (), Target.RESULT_BUCKET, why="no-op on gs://"),
    GcpCall(f"{_STORE}._write_in", "mv", _S, (), Target.RESULT_BUCKET, why="file:// stores only"),
    # Only file:// stores stage a write: on gs:// the clean-up of a failed staging write never runs.
    GcpCall(f"{_STORE}._write_in", "rm", _S, (), Target.RESULT_BUCKET, why="file:// stores only"),
    GcpCall(f"{_STORE}.probe", "rm", _S, _DELETE, Target.RESULT_BUCKET,
            why="the store-health probe removes the object it wrote"),
    GcpCall(f"{_STORE}.session_jobs", "ls", _S, (_LAYOUT,), Target.RESULT_BUCKET,
            why="lists a session's jobs (GET /jobs?session_id=)"),
    GcpCall(f"{_STORE}.sweep_cancel_markers", "ls", _S, (_LAYOUT,), Target.RESULT_BUCKET,
            why="lists the cancel markers to remove the expired ones"),
    GcpCall(f"{_STORE}.sweep_cancel_markers", "rm", _S, _DELETE, Target.RESULT_BUCKET,
            why="removes cancel markers older than the request subscription's retention"),
    # (the sweep finds them by reading a local folder entry by entry; a bucket store has no temporaries)
    GcpCall(f"{_STORE}.sweep_temporary", "rm", _S, _DELETE, Target.RESULT_BUCKET,
            why="removes temporary files a failed write left"),
    # Vertex AI routing (GPURT_VERTEX_TYPES or GPURT_BACKEND=vertex): the scheduler starts, polls and cancels
    # custom jobs that run as gpu-runtime and write their output to the result store.
    *(GcpCall(f"{_VERTEX}.{function}", method, workload, permissions, target, name, why, only_with=VERTEX_AI)
      for function, method, workload, permissions, target, name, why in (
          ("_run", "create", _S, ("aiplatform.customJobs.create",), Target.PROJECT, "", "starts a custom job"),
          ("_run", "create", _S, ("iam.serviceAccounts.actAs",), Target.SERVICE_ACCOUNT,
           contract.RUNTIME_SERVICE_ACCOUNT.account_id, "the job runs as gpu-runtime"),
          ("_run", "get", _S, ("aiplatform.customJobs.get",), Target.PROJECT, "", "polls the job"),
          ("_run", "cancel", _S, ("aiplatform.customJobs.cancel",), Target.PROJECT, "",
           "cancels a job past its deadline"),
          ("cancel", "cancel", _S, ("aiplatform.customJobs.cancel",), Target.PROJECT, "", "cancels on request"),
          ("_read_output", "open", _S, _GET, Target.RESULT_BUCKET, "", "reads the job's output and artifacts"),
          ("_raise_failure", "open", _S, _GET, Target.RESULT_BUCKET, "", "reads the job's error record"),
      )),
    # The job's params travel by reference (one argument is capped at 128 KiB): the scheduler writes them into the
    # job's folder before creating it and removes them once it has ended; the job, as gpu-runtime, reads them.
    *(GcpCall(f"runtime.scheduler.backends.vertex:{function}", method, _S, permissions, Target.RESULT_BUCKET,
              why=why, only_with=VERTEX_AI)
      for function, method, permissions, why in (
          ("_put_params", "makedirs", (), "no-op on gs://"),
          ("_put_params", "pipe_file", _WRITE, "writes the job's params beside its output"),
          ("_remove_params", "rm", _DELETE, "removes the params of an ended job"),
      )),
    GcpCall("runtime.worker.vertex_task:_read", "open", Workload.VERTEX_TASK, _GET,
            Target.RESULT_BUCKET, why="the job reads its params from the result store", only_with=VERTEX_AI),
    GcpCall("runtime.worker.vertex_task:_write", "open", Workload.VERTEX_TASK, _WRITE,
            Target.RESULT_BUCKET, why="the job writes its output under the result store", only_with=VERTEX_AI),
    *(GcpCall(site, method, Workload.OPERATOR, permissions, Target.PROJECT, why=why)
      for site, method, permissions, why in (
          ("validation.dlq.tools:DeadLetterQueue._pull", "pull", _CONSUME, "gpurt dlq inspect / replay"),
          ("validation.dlq.tools:DeadLetterQueue._release", "modify_ack_deadline", _CONSUME, "gpurt dlq inspect"),
          ("validation.dlq.tools:DeadLetterQueue.replay", "acknowledge", _CONSUME, "gpurt dlq replay"),
          ("runtime.access.transport:ResultSubscription.__enter__", "create_subscription",
           ("pubsub.subscriptions.create", "pubsub.topics.attachSubscription"), _RESULTS_WAIT),
          ("runtime.access.transport:ResultSubscription.__enter__", "subscribe", _CONSUME, _RESULTS_WAIT),
          ("runtime.access.transport:ResultSubscription.__exit__", "delete_subscription",
           ("pubsub.subscriptions.delete",), _RESULTS_WAIT),
          (f"{_ADMIN}.topic_names", "list_topics", ("pubsub.topics.list",), "gpurt validate"),
          (f"{_ADMIN}.subscription", "get_subscription", ("pubsub.subscriptions.get",), "gpurt validate"),
          (f"{_ADMIN}.create_subscription", "create_subscription",
           ("pubsub.subscriptions.create", "pubsub.topics.attachSubscription"), "gpurt validate (probe)"),
          (f"{_ADMIN}.delete_subscription", "delete_subscription", ("pubsub.subscriptions.delete",),
           "gpurt validate (probe)"),
          (f"{_ADMIN}.publish", "publish", ("pubsub.topics.publish",), "gpurt validate (probe)"),
          (f"{_ADMIN}.pull", "pull", _CONSUME, "gpurt validate (probe, DLQ peek)"),
          (f"{_ADMIN}.acknowledge", "acknowledge", _CONSUME, "gpurt validate (probe)"),
          (f"{_ADMIN}.release", "modify_ack_deadline", _CONSUME, "gpurt validate (DLQ peek)"),
          (f"{_ADMIN}.iam_members", "get_iam_policy",
           ("pubsub.topics.getIamPolicy", "pubsub.subscriptions.getIamPolicy"), "gpurt validate"),
          ("validation.adapters.vertex:GoogleVertexQuota.custom_job_names", "list", ("aiplatform.customJobs.list",),
           "gpurt validate"),
          ("validation.adapters.vertex:GoogleVertexQuota.region_quotas", "get", ("compute.regions.get",),
           "gpurt validate"),
          ("validation.adapters.vertex:GoogleVertexQuota.project_quotas", "get", ("compute.projects.get",),
           "gpurt validate (global quotas)"),
          ("validation.adapters.vertex:GoogleVertexQuota.training_quota_limits", "get", ("cloudquotas.quotas.get",),
           "gpurt validate"),
          ("validation.adapters.iam:ResourceManagerIam.role_bindings", "get_iam_policy",
           ("resourcemanager.projects.getIamPolicy",), "gpurt validate"),
          ("validation.adapters.iam:ResourceManagerIam.project_number", "get_project",
           ("resourcemanager.projects.get",), "gpurt validate"),
          ("validation.adapters.iam:GoogleResourceIam.bucket_bindings", "get_iam_policy",
           ("storage.buckets.getIamPolicy",), "gpurt validate"),
          ("validation.adapters.iam:GoogleResourceIam.bucket_bindings", "bucket", (), "a local handle, no request"),
          ("validation.adapters.iam:GoogleResourceIam.service_account_bindings", "post",
           ("iam.serviceAccounts.getIamPolicy",), "gpurt validate"),
          ("validation.state.checkpoints:list_checkpoints", "ls", ("storage.objects.list",),
           "gpurt state restore --backend-url"),
          ("validation.state.checkpoints:list_checkpoints", "unstrip_protocol", (), "string formatting"),
          ("validation.state.checkpoints:read_checkpoint", "open", ("storage.objects.get",), "gpurt state restore"),
      )),
)

KUBE_CALLS: Final = (
    KubeCall("runtime.leases.kubernetes:KubernetesLeaseStore.get", "read_namespaced_lease", _S, *_LEASES, "get",
             contract.RUNTIME_NAMESPACE, contract.LEADER_LEASE_NAME),
    KubeCall("runtime.leases.kubernetes:KubernetesLeaseStore._write", "create_namespaced_lease", _S, *_LEASES,
             "create", contract.RUNTIME_NAMESPACE),
    KubeCall("runtime.leases.kubernetes:KubernetesLeaseStore._write", "replace_namespaced_lease", _S, *_LEASES,
             "update", contract.RUNTIME_NAMESPACE, contract.LEADER_LEASE_NAME),
    # The maintenance mode every replica follows, and their reports (runtime.scheduler.maintenance): the deploy
    # creates the ConfigMap, the scheduler reads and patches it by name.
    KubeCall("runtime.scheduler.maintenance:ConfigMapModeStore.read", "read_namespaced_config_map", _S, "",
             "configmaps", "get", contract.RUNTIME_NAMESPACE, contract.MAINTENANCE_CONFIGMAP),
    KubeCall("runtime.scheduler.maintenance:ConfigMapModeStore._patch", "patch_namespaced_config_map", _S, "",
             "configmaps", "patch", contract.RUNTIME_NAMESPACE, contract.MAINTENANCE_CONFIGMAP),
    KubeCall("runtime.scheduler.pools.kubernetes:KubernetesPools._groups", "list_namespaced_custom_object", _S,
             dask_operator.GROUP, dask_operator.WORKER_GROUP_PLURAL, "list", contract.COMPUTE_NAMESPACE),
    KubeCall(f"{_POOLS}._patch_group", "patch_namespaced_custom_object", _S,
             dask_operator.GROUP, dask_operator.WORKER_GROUP_PLURAL, "patch", contract.COMPUTE_NAMESPACE),
    KubeCall(f"{_POOLS}._pin_autoscaler", "patch_namespaced_custom_object",
             _S, dask_operator.GROUP, dask_operator.AUTOSCALER_PLURAL, "patch", contract.COMPUTE_NAMESPACE,
             f"{contract.DASK_CLUSTER_NAME}{contract.DASK_AUTOSCALER_SUFFIX}"),
    # Rolling workers onto a new template (runtime.scheduler.pools.rollout): the DaskCluster's worker template for
    # the operator's default group, and the worker Deployments it retires. Worker names are generated.
    *(KubeCall(f"{_ROLLOUT}.{function}", method, _S, group, resource, verb, contract.COMPUTE_NAMESPACE)
      for function, method, group, resource, verb in (
          ("_sync_default", "list_namespaced_custom_object", dask_operator.GROUP, dask_operator.CLUSTER_PLURAL,
           "list"),
          ("_patch", "patch_namespaced_custom_object", dask_operator.GROUP, dask_operator.WORKER_GROUP_PLURAL,
           "patch"),
          ("_deployments", "list_namespaced_deployment", "apps", "deployments", "list"),
          ("_retire", "delete_namespaced_deployment", "apps", "deployments", "delete"),
      )),
    # Queued pools (GPURT_QUEUED_POOLS): ProvisioningRequests and their PodTemplates, and the worker
    # Deployments that consume them. Their names are generated, so no call names its object.
    *(KubeCall(f"{_QUEUED}.{function}", method, _S, group, resource, verb, contract.COMPUTE_NAMESPACE,
               only_with=QUEUED_POOLS)
      for function, method, group, resource, verb in (
          ("requests", "list_namespaced_custom_object", *_PROVREQS, "list"),
          ("_request_capacity", "create_namespaced_pod_template", "", "podtemplates", "create"),
          ("_request_capacity", "create_namespaced_custom_object", *_PROVREQS, "create"),
          ("_delete_request", "delete_namespaced_custom_object", *_PROVREQS, "delete"),
          ("_delete_template", "delete_namespaced_pod_template", "", "podtemplates", "delete"),
          ("_sweep_templates", "list_namespaced_pod_template", "", "podtemplates", "list"),
          ("_workers", "list_namespaced_deployment", "apps", "deployments", "list"),
          ("_remove_workers", "delete_namespaced_deployment", "apps", "deployments", "delete"),
      )),
    # The operator's tools (gpurt validate, leader --kubernetes, rollback --kubernetes), on their kubeconfig.
    *(KubeCall(site, method, Workload.OPERATOR, group, resource, verb, namespace)
      for site, method, group, resource, verb, namespace in (
          ("runtime.leases.kubernetes:KubernetesLeaseStore.get", "read_namespaced_lease", *_LEASES, "get",
           contract.RUNTIME_NAMESPACE),
          (f"{_KUBE}.list_pods", "list_namespaced_pod", "", "pods", "list", contract.RUNTIME_NAMESPACE),
          (f"{_KUBE}.list_pods", "list_namespaced_pod", "", "pods", "list", contract.COMPUTE_NAMESPACE),
          # A port-forward (through the kubelet), which a private cluster's control plane can open; the
          # API server's proxy to 8080 (scheduler) or 8787 (Dask dashboard) cannot reach the node.
          (f"{_KUBE}.pod_get", "connect_get_namespaced_pod_portforward", "", "pods/portforward", "create",
           contract.RUNTIME_NAMESPACE),
          (f"{_KUBE}.pod_get", "connect_get_namespaced_pod_portforward", "", "pods/portforward", "create",
           contract.COMPUTE_NAMESPACE),
          (f"{_KUBE}.list_custom_objects", "list_cluster_custom_object", "monitoring.googleapis.com", "clusterrules",
           "list", ""),
          (f"{_KUBE}.list_custom_objects", "list_namespaced_custom_object", "", "(any namespaced kind)", "list", ""),
          (f"{_APPS}.read_deployment", "read_namespaced_deployment", "apps", "deployments", "get",
           contract.RUNTIME_NAMESPACE),
          (f"{_APPS}.list_replica_sets", "list_namespaced_replica_set", "apps", "replicasets", "list",
           contract.RUNTIME_NAMESPACE),
          (f"{_APPS}.patch_deployment", "patch_namespaced_deployment", "apps", "deployments", "patch",
           contract.RUNTIME_NAMESPACE),
      )),
)

# The packages whose code calls the cloud: the scheduler and worker images, and the operator's tools (their
# calls are declared too, though the stack grants people nothing). The local platform is not among them.
# Every module of these that imports a cloud library is in CLIENT_SITES or NO_CLIENT_CALLS (the tests walk them).
CALLER_PACKAGES: Final = (
    "runtime.scheduler", "runtime.scheduler.store", "runtime.scheduler.messaging", "runtime.worker", "validation.dlq",
    "runtime.access", "runtime.pubsub", "runtime.storage", "runtime.vertex", "runtime.leases",
    "validation.adapters", "validation.rollback", "validation.state",
)
# Where cloud clients are held: module -> the expressions that are one. Every call on them must be declared
# above (the tests walk these modules).
CLIENT_SITES: Final = {
    "validation.dlq.tools": ("self._clients.subscriber",),
    "runtime.access.transport": ("self._clients.subscriber",),
    "validation.adapters.pubsub": ("self._publisher", "self._subscriber"),
    "validation.adapters.vertex": ("self._jobs", "self._regions", "self._projects", "self._session"),
    "validation.adapters.kube": ("self._core", "self._custom"),
    "validation.adapters.iam": ("self._client", "self._storage", "self._storage.bucket(bucket)", "self._session"),
    "validation.rollback.kubernetes": ("self._apps",),
    "validation.state.checkpoints": ("fs",),
    "runtime.scheduler.consumer": ("self._subscriber",),
    "runtime.scheduler.reclaimer": ("self._subscriber",),
    "runtime.pubsub.publisher": ("self._client",),
    "runtime.scheduler.messaging.depth": ("self._client",),
    "runtime.scheduler.store.store": ("self._fs",),
    "runtime.scheduler.backends.vertex": ("self._client", "fsspec", "fs"),
    "runtime.worker.vertex_task": ("fsspec",),
    "runtime.leases.kubernetes": ("self._api",),
    "runtime.scheduler.maintenance": ("self._api",),
    "runtime.scheduler.pools.kubernetes": ("self._api",),
    "runtime.scheduler.pools.queued": ("self._api",),
    "runtime.scheduler.pools.rollout": ("self._api",),
}
# Modules that import a cloud library without calling a service through it.
NO_CLIENT_CALLS: Final = {
    "runtime.pubsub.clients": "builds clients; calls nothing",
    "runtime.pubsub.admin": "creates topics on the local platform's emulator; Pulumi owns them in the cloud",
    "runtime.scheduler.dispatch": "uses the Pub/Sub client's scheduler class, no API",
    "runtime.scheduler.service": "builds clients (in-cluster config) and hands them to the modules above",
    "runtime.storage.filesystems": "maps a URL to its filesystem (gcsfs on gs://); the store's calls are declared",
    "runtime.vertex.rest": "the Vertex AI REST adapter behind VertexBackend's client (declared there)",
    "runtime.scheduler.pools.kubernetes_api": "the Kubernetes client adapter behind the api of KubernetesPools "
                                              "and QueuedProvisioner (declared there)",
}
# Roles of the contract's project table that no call of the code needs, kept because the contract's role
# table (the operators' runbooks) states them; the proof fails on any other grant nobody needs.
CONTRACT_ROLES_WITHOUT_CALLER: Final = {
    (contract.SCHEDULER_SERVICE_ACCOUNT.account_id, "roles/logging.logWriter"):
        "logs go to stderr and GKE's logging agent ships them with the node account",
    (contract.RUNTIME_SERVICE_ACCOUNT.account_id, "roles/artifactregistry.reader"):
        "images are pulled by the kubelet (node account) and by Vertex AI's service agent, not by the pods",
}
