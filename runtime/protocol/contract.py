"""The platform contract: every name and setting that infrastructure and validation both rely on.

Declared once, here. Pulumi components build resources from these values, the runtime connects with
them, and ``gpurt validate`` checks the deployed reality against them. No other module repeats these
literals. This module imports nothing heavier than the standard library so the runtime image, the
CLI and the Pulumi program can all import it cheaply.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Final

# --- Pub/Sub -------------------------------------------------------------------------------------

REQUEST_TOPIC: Final = "gpu-job-request"
RESULT_TOPIC: Final = "gpu-job-result"
REQUEST_DLQ_TOPIC: Final = "gpu-job-request-dlq"

REQUEST_SUBSCRIPTION: Final = "gpu-job-request-sub"
RESULT_SUBSCRIPTION: Final = "gpu-job-result-sub"
REQUEST_DLQ_SUBSCRIPTION: Final = "gpu-job-request-dlq-sub"
# The deploy probe's own way in: a subscription of the urgent topic that admits only messages carrying the probe
# attribute, consumed by the gpu-scheduler apart from every queue's subscription, so no backlog delays it.
PROBE_SUBSCRIPTION: Final = "gpu-job-probe-sub"
PROBE_ATTRIBUTE: Final = "probe"
# The urgent class's queue (``runtime.protocol.queues``): the deploy probe and on-call operators publish here, and
# its jobs take the next free slot ahead of every other queue's backlog.
URGENT_REQUEST_TOPIC: Final = "gpu-job-request-urgent"
URGENT_REQUEST_SUBSCRIPTION: Final = "gpu-job-request-urgent-sub"

# The queue contract fixes these three; a GPU job may run for minutes, hence the long ack deadline.
ACK_DEADLINE_S: Final = 600
MESSAGE_RETENTION_S: Final = 7 * 24 * 3600
MAX_DELIVERY_ATTEMPTS: Final = 5
# Pub/Sub's allowed dead-letter range; the policy pack enforces it on every pull subscription.
DELIVERY_ATTEMPTS_RANGE: Final = (5, 100)
# Exponential redelivery backoff for nacked or expired messages (Pub/Sub bounds: 0 s to 600 s).
RETRY_MIN_BACKOFF_S: Final = 10
RETRY_MAX_BACKOFF_S: Final = 600


@dataclass(frozen=True)
class SubscriptionSpec:
    """A pull subscription the platform depends on, with the settings validation checks."""

    name: str
    topic: str
    ack_deadline_s: int = ACK_DEADLINE_S
    retention_s: int = MESSAGE_RETENTION_S
    dead_letter_topic: str | None = None
    max_delivery_attempts: int | None = None
    retry_min_backoff_s: int | None = None
    retry_max_backoff_s: int | None = None
    filter: str = ""
    """Pub/Sub's subscription filter (immutable once created): only matching messages are delivered."""


@dataclass(frozen=True)
class TopicSpec:
    """A topic and whether it is a dead-letter queue (which must be empty after a deploy)."""

    name: str
    is_dead_letter: bool = False


TOPICS: Final = (
    TopicSpec(REQUEST_TOPIC),
    TopicSpec(URGENT_REQUEST_TOPIC),
    TopicSpec(RESULT_TOPIC),
    TopicSpec(REQUEST_DLQ_TOPIC, is_dead_letter=True),
)

REQUEST_SUBSCRIPTION_SPEC: Final = SubscriptionSpec(
    name=REQUEST_SUBSCRIPTION,
    topic=REQUEST_TOPIC,
    dead_letter_topic=REQUEST_DLQ_TOPIC,
    max_delivery_attempts=MAX_DELIVERY_ATTEMPTS,
    retry_min_backoff_s=RETRY_MIN_BACKOFF_S,
    retry_max_backoff_s=RETRY_MAX_BACKOFF_S,
)
RESULT_SUBSCRIPTION_SPEC: Final = SubscriptionSpec(name=RESULT_SUBSCRIPTION, topic=RESULT_TOPIC)
# The urgent queue's scheduler subscription: the request subscription's settings on the urgent topic, less the
# deploy probe, which the probe subscription alone takes (a probe must not also wait for a slot here).
URGENT_REQUEST_SUBSCRIPTION_SPEC: Final = replace(
    REQUEST_SUBSCRIPTION_SPEC, name=URGENT_REQUEST_SUBSCRIPTION, topic=URGENT_REQUEST_TOPIC,
    filter=f"NOT attributes:{PROBE_ATTRIBUTE}")
# A dead-letter topic without a subscription drops what it receives: every DLQ gets one.
REQUEST_DLQ_SUBSCRIPTION_SPEC: Final = SubscriptionSpec(name=REQUEST_DLQ_SUBSCRIPTION, topic=REQUEST_DLQ_TOPIC)

# The probe is published to the urgent topic, not the request topic: every message of a topic reaches every one of
# its subscriptions, so on the request topic it also landed on the request subscription, behind its backlog, and
# came back twice (once from each). On the urgent topic the urgent subscription's filter leaves it out
# (URGENT_REQUEST_SUBSCRIPTION_SPEC), so this subscription alone delivers it, and only the deploy (and the urgent
# queue's publishers, who are on call) may publish there. A filter on attributes is Pub/Sub's own
# (https://cloud.google.com/pubsub/docs/subscription-message-filter); the probe is a noop, so a short ack deadline
# and a day's retention are plenty, and it needs no dead-letter topic.
PROBE_SUBSCRIPTION_SPEC: Final = SubscriptionSpec(
    name=PROBE_SUBSCRIPTION, topic=URGENT_REQUEST_TOPIC, ack_deadline_s=60, retention_s=24 * 3600,
    filter=f'attributes.{PROBE_ATTRIBUTE} = "true"',
)

SUBSCRIPTIONS: Final = (REQUEST_SUBSCRIPTION_SPEC, URGENT_REQUEST_SUBSCRIPTION_SPEC, RESULT_SUBSCRIPTION_SPEC,
                        REQUEST_DLQ_SUBSCRIPTION_SPEC, PROBE_SUBSCRIPTION_SPEC)

# The Pub/Sub service agent forwards dead letters; without these two grants dead-lettering silently
# does nothing.
PUBSUB_SERVICE_AGENT: Final = "service-{project_number}@gcp-sa-pubsub.iam.gserviceaccount.com"
DLQ_TOPIC_AGENT_ROLE: Final = "roles/pubsub.publisher"
SOURCE_SUBSCRIPTION_AGENT_ROLE: Final = "roles/pubsub.subscriber"
# What the platform's users hold on the request topic, and only there.
REQUEST_PUBLISHER_ROLE: Final = "roles/pubsub.publisher"

# The post-deploy probe (docs/validation.md) and how long its result may take.
PROBE_MESSAGE: Final = {"job_id": "deploy-probe", "type": "noop", "session_id": "probe-001"}
PROBE_TIMEOUT_S: Final = 30

# --- Identity --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServiceAccountSpec:
    """A Google service account, its project roles, and the Kubernetes account that impersonates it."""

    account_id: str
    display_name: str
    roles: tuple[str, ...]
    k8s_namespace: str
    k8s_service_account: str

    def email(self, project: str) -> str:
        """The account's e-mail address in ``project``."""
        return f"{self.account_id}@{project}.iam.gserviceaccount.com"


RUNTIME_NAMESPACE: Final = "gpu-runtime"
COMPUTE_NAMESPACE: Final = "compute"
# The dask-kubernetes operator alone. The gpu-scheduler may delete Deployments in `compute` (queued pools'
# workers, whose names the operator generates), and RBAC grants by name or by namespace, never by label: in its
# own namespace the operator's Deployment is out of that grant's reach.
DASK_OPERATOR_NAMESPACE: Final = "dask-operator"
MONITORING_NAMESPACE: Final = "monitoring"

SCHEDULER_SERVICE_ACCOUNT: Final = ServiceAccountSpec(
    account_id="gpu-scheduler",
    display_name="GPU scheduler: consumes job requests, publishes results, submits Vertex AI jobs",
    # Its Pub/Sub roles are bound on the topic and subscriptions it uses (SCOPED_GRANTS): a project-wide
    # publisher could publish to the dead-letter topic, whose messages the leader answers.
    roles=("roles/logging.logWriter",),
    k8s_namespace=RUNTIME_NAMESPACE,
    k8s_service_account="gpu-scheduler",
)
RUNTIME_SERVICE_ACCOUNT: Final = ServiceAccountSpec(
    account_id="gpu-runtime",
    display_name="GPU runtime: Dask GPU workers, and the identity Vertex AI jobs run as",
    roles=("roles/artifactregistry.reader",),
    k8s_namespace=COMPUTE_NAMESPACE,
    k8s_service_account="gpu-runtime",
)
SERVICE_ACCOUNTS: Final = (SCHEDULER_SERVICE_ACCOUNT, RUNTIME_SERVICE_ACCOUNT)

# --- gpu-scheduler settings --------------------------------------------------------------------------


class SchedulerEnv:
    """The environment variables the gpu-scheduler reads: its settings, and the only interface between it and
    what starts it. ``runtime/scheduler/settings.py`` reads them; the Kubernetes manifest
    (``runtime/manifests/scheduler.py``) and the local platform (``runtime/local/platform.py``) write them;
    the IAM proof and the call registry read some of them from the rendered Deployment. docs/scheduler.md has
    the table with what each one means; the tests prove that every variable either writer sets is one
    ``Settings`` reads, in a form it accepts.
    """

    PROJECT: Final = "GPURT_PROJECT"
    DASK_SCHEDULER: Final = "GPURT_DASK_SCHEDULER"
    DASK_CLUSTER: Final = "GPURT_DASK_CLUSTER"
    # The local Dask scheduler's dashboard (host:port), which also serves Dask's Prometheus /metrics.
    DASK_DASHBOARD: Final = "GPURT_DASK_DASHBOARD"
    LOCAL_WORKERS: Final = "GPURT_LOCAL_WORKERS"
    LOCAL_GPUS: Final = "GPURT_LOCAL_GPUS"
    # The device the kernels run on; the local platform's Dask workers read it too (backends.warm_worker).
    DEVICE: Final = "GPURT_DEVICE"
    WARM_WORKERS: Final = "GPURT_WARM_WORKERS"
    SHARD_PATHS: Final = "GPURT_SHARD_PATHS"
    # Kernel jobs always ask Dask for a GPU, even while only the CPU worker runs (GPU pools at zero): they
    # wait for a GPU worker, which the autoscaler starts for them, instead of running on the CPU worker.
    REQUIRE_GPU: Final = "GPURT_REQUIRE_GPU"
    MAX_IN_FLIGHT: Final = "GPURT_MAX_IN_FLIGHT"
    RESULT_STORE: Final = "GPURT_RESULT_STORE"
    HOST: Final = "GPURT_HOST"
    PORT: Final = "GPURT_PORT"
    # The kubelet's probes (/healthz, /readyz) on a listener of their own (SCHEDULER_PROBE_PORT).
    PROBE_PORT: Final = "GPURT_PROBE_PORT"
    CONTROL_TOKEN: Final = "GPURT_CONTROL_TOKEN"
    # The file holding the token (the Secret mounted into the pod); wins over CONTROL_TOKEN when both are set.
    CONTROL_TOKEN_FILE: Final = "GPURT_CONTROL_TOKEN_FILE"
    POOLS: Final = "GPURT_POOLS"
    # The request queues the scheduler consumes and shares its slots between, as ``runtime.protocol.queues.encode``
    # writes them; unset, the built-in ``default`` and ``urgent`` queues.
    QUEUES: Final = "GPURT_QUEUES"
    # Pools whose nodes come only through ProvisioningRequests (queued provisioning):
    # ``pool[=maxRunDurationSeconds],...``. The stack renders it from gpuPools; unset, there are none.
    QUEUED_POOLS: Final = "GPURT_QUEUED_POOLS"
    LEADER: Final = "GPURT_LEADER"
    LEASE_FILE: Final = "GPURT_LEASE_FILE"
    # Vertex AI routing: the job types sent there (comma-separated), or a backend that sends everything there;
    # unset, no Vertex AI call is ever made.
    BACKEND: Final = "GPURT_BACKEND"
    VERTEX_TYPES: Final = "GPURT_VERTEX_TYPES"
    # The Google account Vertex AI custom jobs run as (gpu-runtime); set only together with Vertex AI routing.
    VERTEX_SERVICE_ACCOUNT: Final = "GPURT_VERTEX_SERVICE_ACCOUNT"
    VERTEX_REGION: Final = "GPURT_VERTEX_REGION"
    VERTEX_IMAGE: Final = "GPURT_VERTEX_IMAGE"
    VERTEX_MACHINE_TYPE: Final = "GPURT_VERTEX_MACHINE_TYPE"
    VERTEX_ACCELERATOR: Final = "GPURT_VERTEX_ACCELERATOR"
    # GPUs per custom job: a machine type fixes it (a2-highgpu-2g has 2); one kernel uses one of them.
    VERTEX_ACCELERATOR_COUNT: Final = "GPURT_VERTEX_ACCELERATOR_COUNT"
    # Overflow: a job that has not started on a Dask worker this many seconds after its submission runs as a
    # Vertex AI custom job instead (docs/scheduler.md, "Overflow to Vertex AI"); unset, nothing spills.
    VERTEX_SPILL_AFTER_S: Final = "GPURT_VERTEX_SPILL_AFTER_S"
    # The custom-jobs API's base URL; unset, the regional Google endpoint. The local platform sets its stand-in.
    VERTEX_ENDPOINT: Final = "GPURT_VERTEX_ENDPOINT"
    VERTEX_POLL_S: Final = "GPURT_VERTEX_POLL_S"  # seconds between polls of a running custom job
    LOG_LEVEL: Final = "GPURT_LOG_LEVEL"
    # Bytes a log file written through stderr may reach before its oldest half is dropped (the local platform's).
    LOG_MAX_BYTES: Final = "GPURT_LOG_MAX_BYTES"
    EMULATOR_ADMIN_URL: Final = "GPURT_EMULATOR_ADMIN_URL"
    # a leak hunt (docs/runbooks/scheduler-memory.md): tracemalloc snapshots, how often, how many kept
    TRACEMALLOC_DIR: Final = "GPURT_TRACEMALLOC_DIR"
    TRACEMALLOC_PERIOD_S: Final = "GPURT_TRACEMALLOC_PERIOD_S"
    TRACEMALLOC_KEEP: Final = "GPURT_TRACEMALLOC_KEEP"
    # Names fixed by others: the Pub/Sub client libraries' emulator switch, and the pod's identity, which
    # Kubernetes' downward API gives (a local replica, which has no pod, is named by LOCAL_POD_NAME).
    PUBSUB_EMULATOR_HOST: Final = "PUBSUB_EMULATOR_HOST"
    # A file holding the scheduler's token for an emulator that takes credentials (the local platform's broker);
    # the token itself is never in the environment, which the Dask processes inherit.
    PUBSUB_EMULATOR_TOKEN_FILE: Final = "GPURT_PUBSUB_EMULATOR_TOKEN_FILE"
    POD_NAME: Final = "POD_NAME"
    LOCAL_POD_NAME: Final = "GPURT_POD_NAME"
    POD_NAMESPACE: Final = "POD_NAMESPACE"


SCHEDULER_ENV_NAMES: Final = frozenset(
    value for key, value in vars(SchedulerEnv).items() if key.isupper() and isinstance(value, str))

# --- Kubernetes ------------------------------------------------------------------------------------

SCHEDULER_DEPLOYMENT: Final = "gpu-scheduler"
SCHEDULER_LABELS: Final = {"app": "gpu-scheduler"}
SCHEDULER_PORT: Final = 8080
# The kubelet's probes are served on a port of their own, outside the API's connection cap, so a client that
# holds the API's connections cannot fail the probes and get the replica restarted (docs/scheduler.md#probes).
SCHEDULER_PROBE_PORT: Final = 8081
HEALTH_PATH: Final = "/healthz"
READY_PATH: Final = "/readyz"
# How many connections each port serves at once; past that the oldest connection with no request read is evicted
# (``runtime/scheduler/http_limits.py``, where each number's reason is given; the flood drill floods past them).
API_MAX_CONNECTIONS: Final = 128
PROBE_MAX_CONNECTIONS: Final = 256
# The module the gpu-scheduler runs its Dask scheduler child as (``python -m``): the loopback drill and the
# benchmarks find the child among the gpu-scheduler's processes by it (tests/runtime/scheduler/test_dask_process.py
# resolves it).
DASK_SCHEDULER_MODULE: Final = "runtime.scheduler.dask_process"
METRICS_PATH: Final = "/metrics"
HEALTH_BODY: Final = {"status": "ok"}
# The deploy checklist: all scheduler pods Running within two minutes of a rollout.
POD_READY_TIMEOUT_S: Final = 120
LEADER_LEASE_NAME: Final = "gpu-scheduler-leader"
# The maintenance mode every scheduler replica follows, and each replica's report of it (runtime.scheduler.maintenance).
MAINTENANCE_CONFIGMAP: Final = "gpu-scheduler-maintenance"
CONTROL_TOKEN_SECRET: Final = "gpu-scheduler-control-token"

DASK_CLUSTER_NAME: Final = "gpu-dask"
DASK_SCHEDULER_LABELS: Final = {"component": "scheduler"}
DASK_WORKER_LABELS: Final = {"component": "worker"}
DASK_SCHEDULER_PORT: Final = 8786
DASK_DASHBOARD_PORT: Final = 8787
# The Dask resource name a GPU worker advertises and a GPU task asks for.
DASK_GPU_RESOURCE: Final = "GPU"
# The resource the always-up CPU worker advertises and a job needing no GPU (``noop``: probes, drills) asks
# for, so it runs at once on an idle platform whose GPU pools are at zero (docs/infrastructure.md).
DASK_CPU_RESOURCE: Final = "CPU"
# That worker's pool: one small worker on the system nodes, never autoscaled.
CPU_POOL: Final = "cpu"
# The module every Dask worker preloads (``dask worker --preload``): it compiles the kernels as the worker
# starts, and no kernel job runs on the worker before that is done (docs/scheduler.md, "Warm workers").
DASK_WORKER_PRELOAD: Final = "runtime.worker.warm"

# Blocks of at least this many bytes get a memory mapping of their own from glibc's malloc, given back
# to the OS as they are freed, in the gpu-scheduler (``runtime.scheduler.allocator``) and the Dask scheduler's pod
# and local process (glibc's own variable, below). glibc's default raises this bound to the size of every
# such block freed, so a large block allocated over and over (CPython's table of interned strings, rebuilt
# every 10,000 to 15,000 jobs) comes from the heap, each time in a new place: steps of resident memory that
# stay (docs/scheduler.md, "Memory over time").
MALLOC_MMAP_THRESHOLD_BYTES: Final = 1 << 20
MALLOC_MMAP_THRESHOLD_ENV: Final = "MALLOC_MMAP_THRESHOLD_"

GPU_NODE_LABEL: Final = ("nvidia.com/gpu", "true")
GPU_TAINT_KEY: Final = "nvidia.com/gpu"
GPU_TAINT_VALUE: Final = "present"
GPU_TAINT_EFFECT: Final = "NoSchedule"
GPU_RESOURCE: Final = "nvidia.com/gpu"

# Labels on every resource this project creates (GCP label and Kubernetes label syntax both allow it).
COMMON_LABELS: Final = {"app.kubernetes.io/part-of": "gpu-runtime", "managed-by": "pulumi"}
GCP_LABELS: Final = {"part-of": "gpu-runtime", "managed-by": "pulumi"}

DCGM_EXPORTER_PORT: Final = 9400

# --- Vertex AI and metrics -------------------------------------------------------------------------

VERTEX_JOB_PREFIX: Final = "gpu-runtime-"
METRICS_PREFIX: Final = "gpu_runtime_"


@dataclass(frozen=True)
class Contract:
    """The whole contract as one value, for code that wants to pass it around (validation reports)."""

    topics: tuple[TopicSpec, ...] = TOPICS
    subscriptions: tuple[SubscriptionSpec, ...] = SUBSCRIPTIONS
    service_accounts: tuple[ServiceAccountSpec, ...] = SERVICE_ACCOUNTS
    namespaces: tuple[str, ...] = field(
        default=(RUNTIME_NAMESPACE, COMPUTE_NAMESPACE, MONITORING_NAMESPACE)
    )


CONTRACT: Final = Contract()


# --- Metric names (the scheduler exports them; alert rules and dashboards query them) --------------


@dataclass(frozen=True)
class MetricNames:
    """Prometheus series of the gpu-scheduler, all prefixed ``gpu_runtime_``."""

    jobs_total: str = f"{METRICS_PREFIX}jobs_total"  # labels: type, status
    job_duration_seconds: str = f"{METRICS_PREFIX}job_duration_seconds"  # histogram, label: type
    queue_wait_seconds: str = f"{METRICS_PREFIX}queue_wait_seconds"  # histogram, label: queue; publish to start
    queue_depth: str = f"{METRICS_PREFIX}queue_depth"  # label: queue; undelivered on its scheduler subscription
    queue_slots: str = f"{METRICS_PREFIX}queue_slots"  # label: queue; slots its jobs hold now on this replica
    queue_started_total: str = f"{METRICS_PREFIX}queue_started_total"  # label: queue; jobs started (share)
    jobs_in_flight: str = f"{METRICS_PREFIX}jobs_in_flight"
    backlog_messages: str = f"{METRICS_PREFIX}backlog_messages"  # undelivered on the request subscription
    dlq_messages: str = f"{METRICS_PREFIX}dlq_messages"
    job_spills_total: str = f"{METRICS_PREFIX}job_spills_total"  # labels: type; jobs run on Vertex AI as overflow
    job_retries_total: str = f"{METRICS_PREFIX}job_retries_total"  # redeliveries seen (attempt > 1)
    result_cache_hits_total: str = f"{METRICS_PREFIX}result_cache_hits_total"  # label: type; answered from the cache
    result_cache_misses_total: str = f"{METRICS_PREFIX}result_cache_misses_total"  # label: type; looked, ran
    pool_workers: str = f"{METRICS_PREFIX}pool_workers"  # label: pool
    pool_evictions_total: str = f"{METRICS_PREFIX}pool_evictions_total"  # label: pool
    leader: str = f"{METRICS_PREFIX}leader"  # 1 on the replica holding the lease
    maintenance_mode: str = f"{METRICS_PREFIX}maintenance_mode"  # 1 while draining
    reclaimer_errors_total: str = f"{METRICS_PREFIX}reclaimer_errors_total"
    leader_election_failures_total: str = f"{METRICS_PREFIX}leader_election_failures_total"


METRICS: Final = MetricNames()


# --- gpu-scheduler runtime (appended by the scheduler service) -------------------------------------

# Message attribute `gpurt dlq replay` sets on a request it republishes from the dead-letter queue: the
# scheduler then runs the job again even though the result store holds its `failed` result.
REPLAY_ATTRIBUTE: Final = "gpurt_replay"
# Attributes Pub/Sub adds to a message it dead-letters (https://cloud.google.com/pubsub/docs/handling-failures):
# the subscription it came from and that subscription's project. The DLQ reclaimer answers only a message that
# carries them naming the request subscription; IAM (only the service agent may publish to the dead-letter
# topic) is what keeps anyone else from adding them too.
DEAD_LETTER_SOURCE_SUBSCRIPTION: Final = "CloudPubSubDeadLetterSourceSubscription"
DEAD_LETTER_SOURCE_PROJECT: Final = "CloudPubSubDeadLetterSourceSubscriptionProject"


# --- Subscriptions without a dead-letter policy (appended by infra-core) -----------------------------
# The policy pack requires a dead-letter policy on every pull subscription unless it carries this label.
# Two kinds do: a DLQ's own subscription (dead-lettering a dead letter only hides it) and the result
# subscription (its readers are clients that skip results they do not own; nacking those must not burn
# delivery attempts and shunt other clients' results into a queue nobody replays).
NO_DEAD_LETTER_LABEL: Final = ("dead-letter", "none")
# A GPU node pool that shares large GPUs (A100/H100) among containers on purpose carries this GCP label; the
# policy refuses such sharing without it (stack config: gpuPools[].gpuSharing.declared).
GPU_SHARING_DECLARED_LABEL: Final = ("gpu-sharing", "declared")


# --- Kubernetes workloads (appended by infra-k8s) ---------------------------------------------------

# Key inside the CONTROL_TOKEN_SECRET Secret that holds the bearer token.
CONTROL_TOKEN_SECRET_KEY: Final = "token"
# Every Dask worker group (the DaskWorkerGroup object and its pods) carries this label with its GPU pool
# name. The operator names the cluster's own group `<cluster>-default` whatever pool it serves, so code
# that scales a pool looks its group up by this label rather than by name.
DASK_POOL_LABEL: Final = "gpu-runtime.dev/pool"
# On each worker template (a group's ``spec.worker.metadata``, which the operator copies onto every worker Deployment
# it makes): a digest of the template without its images. The operator reads a template only when it adds a
# worker, so the gpu-scheduler rolls a worker whose Deployment carries another digest or other images than its
# group's template (runtime.scheduler.pools.rollout).
DASK_WORKER_TEMPLATE_ANNOTATION: Final = "gpu-runtime.dev/worker-template"
# On the Dask scheduler's template: what the running scheduler depends on besides its image (the locked Dask and
# Python versions, its settings). The DaskCluster is replaced, and the scheduler restarted, only when it changes.
DASK_SCHEDULER_REVISION_LABEL: Final = "gpu-runtime.dev/scheduler-revision"
# The DaskAutoscaler of a cluster is named ``<cluster><suffix>``; pool scaling pins its bounds.
DASK_AUTOSCALER_SUFFIX: Final = "-autoscaler"
# A pool other than the primary one has no DaskAutoscaler: its DaskWorkerGroup carries the stack's
# daskWorkersMax under this annotation, and the gpu-scheduler refuses to scale the pool beyond it.
DASK_MAX_WORKERS_ANNOTATION: Final = "gpu-runtime.dev/max-workers"
# The backend setting (SchedulerEnv.BACKEND) that sends every job to Vertex AI custom jobs.
VERTEX_BACKEND: Final = "vertex"
# In-cluster address of the Dask scheduler Service the operator creates (`<cluster>-scheduler`).
DASK_SCHEDULER_ADDRESS: Final = (
    f"tcp://{DASK_CLUSTER_NAME}-scheduler.{COMPUTE_NAMESPACE}.svc.cluster.local:{DASK_SCHEDULER_PORT}"
)
# In-cluster URL of the gpu-scheduler Service.
SCHEDULER_URL: Final = f"http://{SCHEDULER_DEPLOYMENT}.{RUNTIME_NAMESPACE}.svc.cluster.local:{SCHEDULER_PORT}"
# A workload that cannot meet a policy rule says so on its pod template with this annotation, whose value
# names the rule and the reason (the DCGM exporter must run privileged to read GPUs it does not claim).
POLICY_EXCEPTION_ANNOTATION: Final = "gpu-runtime.dev/policy-exception"
# Prometheus job label of the DCGM exporter's scrape target (the Service name), which alerts select on.
DCGM_EXPORTER_JOB: Final = "dcgm-exporter"


# --- Pub/Sub series as Prometheus sees them (appended by monitoring) --------------------------------
# Cloud Monitoring's Pub/Sub subscription metrics as Managed Service for Prometheus names them in PromQL
# (``<service>:<metric path with / as _>``, labels ``monitored_resource`` and the resource's labels). The
# local emulator serves the same series on its admin port, so one query works in both places.
_PUBSUB_SERIES: Final = "pubsub_googleapis_com:subscription_"


@dataclass(frozen=True)
class PubSubMetricNames:
    """Per-subscription Pub/Sub series, labelled ``subscription_id`` and ``monitored_resource``."""

    undelivered: str = f"{_PUBSUB_SERIES}num_undelivered_messages"  # the backlog; of a *-dlq-sub: DLQ depth
    oldest_unacked_age: str = f"{_PUBSUB_SERIES}oldest_unacked_message_age"  # seconds
    dead_lettered: str = f"{_PUBSUB_SERIES}dead_letter_message_count"  # forwarded to the dead-letter topic
    subscription_label: str = "subscription_id"
    resource_label: tuple[str, str] = ("monitored_resource", "pubsub_subscription")


PUBSUB_METRICS: Final = PubSubMetricNames()


# --- Resource-scoped grants (appended by infra-iam) ---------------------------------------------------
# Beyond the project-level role table above, what the code needs and the table lacks, each granted on the
# narrowest resource that works. The gpu-scheduler writes results, artifacts and markers to the result
# bucket and reads Pub/Sub backlog from Cloud Monitoring; it starts Vertex AI jobs that run as gpu-runtime.

RESULT_BUCKET_SUFFIX: Final = "-gpu-runtime-results"


def result_bucket(project: str) -> str:
    """The result bucket of ``project`` (bucket names are global, hence the project prefix)."""
    return f"{project}{RESULT_BUCKET_SUFFIX}"


class GrantScope(StrEnum):
    """The resource a scoped grant is bound on."""

    PROJECT = "project"
    RESULT_BUCKET = "result-bucket"
    SERVICE_ACCOUNT = "service-account"
    TOPIC = "topic"
    SUBSCRIPTION = "subscription"


@dataclass(frozen=True)
class ScopedGrant:
    """``role`` for service account ``account_id`` on one resource (``target``: the account acted as, the topic
    or the subscription)."""

    account_id: str
    role: str
    scope: GrantScope
    reason: str
    target: str = ""
    vertex_only: bool = False
    """Granted only by a stack whose scheduler routes jobs to Vertex AI (``SchedulerEnv.VERTEX_TYPES`` set): the calls
    that need it are made only then, so any other stack holding it would hold a grant nobody uses."""


def queue_consume_grant(subscription: str) -> ScopedGrant:
    """The gpu-scheduler's grant on one request queue's subscription (``runtime.protocol.queues``)."""
    return ScopedGrant(SCHEDULER_SERVICE_ACCOUNT.account_id, "roles/pubsub.subscriber", GrantScope.SUBSCRIPTION,
                       "pulls, acks and nacks job requests of its queue", target=subscription)


# The grants every stack binds; each desk queue a stack declares adds the scheduler's on its subscription
# (``scoped_grants``).
SCOPED_GRANTS: Final = (
    ScopedGrant(SCHEDULER_SERVICE_ACCOUNT.account_id, "roles/pubsub.publisher", GrantScope.TOPIC,
                "publishes results; the only account that may (docs/scheduler.md, who may publish where)",
                target=RESULT_TOPIC),
    *(queue_consume_grant(subscription) for subscription in (REQUEST_SUBSCRIPTION, URGENT_REQUEST_SUBSCRIPTION)),
    ScopedGrant(SCHEDULER_SERVICE_ACCOUNT.account_id, "roles/pubsub.subscriber", GrantScope.SUBSCRIPTION,
                "the DLQ reclaimer reads and releases dead letters", target=REQUEST_DLQ_SUBSCRIPTION),
    ScopedGrant(SCHEDULER_SERVICE_ACCOUNT.account_id, "roles/pubsub.subscriber", GrantScope.SUBSCRIPTION,
                "pulls and acks the deploy probe apart from the request backlog", target=PROBE_SUBSCRIPTION),
    ScopedGrant(SCHEDULER_SERVICE_ACCOUNT.account_id, "roles/storage.objectUser", GrantScope.RESULT_BUCKET,
                "reads and writes results, artifacts and markers; replaces objects (create + delete)"),
    ScopedGrant(SCHEDULER_SERVICE_ACCOUNT.account_id, "roles/monitoring.viewer", GrantScope.PROJECT,
                "reads the request and dead-letter backlog (num_undelivered_messages); no narrower resource"),
    # Vertex AI custom jobs have no IAM policy of their own: creating one is a project permission.
    ScopedGrant(SCHEDULER_SERVICE_ACCOUNT.account_id, "roles/aiplatform.user", GrantScope.PROJECT,
                "creates, polls and cancels Vertex AI custom jobs", vertex_only=True),
    ScopedGrant(SCHEDULER_SERVICE_ACCOUNT.account_id, "roles/iam.serviceAccountUser", GrantScope.SERVICE_ACCOUNT,
                "starts Vertex AI custom jobs that run as gpu-runtime (iam.serviceAccounts.actAs)",
                target=RUNTIME_SERVICE_ACCOUNT.account_id, vertex_only=True),
    # The Dask workers make no cloud call; only a Vertex AI job running as gpu-runtime writes, and only its
    # own output under the result store: objects on the result bucket, never its IAM policy or retention.
    ScopedGrant(RUNTIME_SERVICE_ACCOUNT.account_id, "roles/storage.objectUser", GrantScope.RESULT_BUCKET,
                "Vertex AI jobs write their output and artifacts under the result store", vertex_only=True),
)


def scoped_grants(vertex: bool, queue_subscriptions: Iterable[str] = ()) -> tuple[ScopedGrant, ...]:
    """The scoped grants of a stack: those that only Vertex AI routing needs are left out when ``vertex`` is off,
    and the scheduler consumes each of ``queue_subscriptions`` (every queue's subscription of the stack's config,
    ``runtime.protocol.queues``), besides the built-in queues' that every stack has."""
    fixed = tuple(grant for grant in SCOPED_GRANTS if vertex or not grant.vertex_only)
    bound = {(grant.scope, grant.target) for grant in fixed}
    desks = dict.fromkeys(s for s in queue_subscriptions if (GrantScope.SUBSCRIPTION, s) not in bound)
    return (*fixed, *(queue_consume_grant(subscription) for subscription in desks))
