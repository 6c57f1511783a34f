"""Typed stack configuration: what ``Pulumi.<stack>.yaml`` may say, checked before any resource is declared.

``parse_stack_config`` is pure (a mapping in, a validated ``StackConfig`` out) so it is unit-tested without
Pulumi; ``load_stack_config`` reads the running stack's ``pulumi.Config`` and hands it to the parser. A bad
value fails the program early with every problem listed by its config key, not deep inside a provider call.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Final

import pulumi
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from components import placeholders
from runtime.manifests import gpu_options
from runtime.protocol import contract, queues

PROJECT_NAMESPACE: Final = "gpu-runtime"
CONTROL_TOKEN_KEY: Final = "controlToken"

# Keys of the project namespace that hold structured (object or list) values; Pulumi passes them as JSON.
_OBJECT_KEYS: Final = ("zones", "network", "systemPool", "gpuPools", "images", "vertex", "replaceGpuPools",
                       "maintenanceWindow", "deployWindow", "requestPublishers", "queues", "urgentPublishers")
_INT_KEYS: Final = ("schedulerReplicas", "resultRetentionDays")
_BOOL_KEYS: Final = ("deletionProtection",)
_STRING_KEYS: Final = ("releaseChannel",)
# Every project-namespace key the program reads into ``StackConfig`` (the control token is read on its own).
STACK_KEYS: Final = (*_OBJECT_KEYS, *_INT_KEYS, *_BOOL_KEYS, *_STRING_KEYS)

# Which machine families can host which accelerator (GCP attaches A100/L4/H100 only to their own families).
ACCELERATOR_MACHINE_FAMILIES: Final = {
    "nvidia-tesla-t4": ("n1-",),
    "nvidia-tesla-v100": ("n1-",),
    "nvidia-tesla-p100": ("n1-",),
    "nvidia-tesla-a100": ("a2-highgpu-", "a2-megagpu-"),
    "nvidia-a100-80gb": ("a2-ultragpu-",),
    "nvidia-l4": ("g2-",),
    "nvidia-h100-80gb": ("a3-highgpu-",),
    "nvidia-h100-mega-80gb": ("a3-megagpu-",),
    "nvidia-h200-141gb": ("a3-ultragpu-",),
}
# Accelerator-optimized machine types (a2-highgpu-2g, a3-highgpu-8g, ...) carry a fixed number of GPUs in their name.
_FIXED_GPU_COUNT_RE: Final = re.compile(r"^a[23]-[a-z]+-(\d+)g$")
# Vertex AI names the same accelerators by its AcceleratorType enum (nvidia-tesla-t4 -> NVIDIA_TESLA_T4); a GKE
# label value there fails only when the scheduler submits its first custom job.
VERTEX_ACCELERATOR_MACHINE_FAMILIES: Final = {
    name.upper().replace("-", "_"): families for name, families in ACCELERATOR_MACHINE_FAMILIES.items()
}
# GKE node pool names: lowercase DNS label, and short enough to leave room for GKE's own suffixes.
_POOL_NAME_RE: Final = re.compile(r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$")
RELEASE_CHANNELS: Final = ("RAPID", "REGULAR", "STABLE", "EXTENDED")


def _check_host(
    machine_type: str, accelerator: str, count: int, families_of: Mapping[str, tuple[str, ...]]
) -> None:
    """Raise ValueError unless ``machine_type`` can host ``count`` GPUs of the known type ``accelerator``."""
    families = families_of.get(accelerator)
    if families is None:
        raise ValueError(f"acceleratorType {accelerator!r} is not one of: {', '.join(sorted(families_of))}")
    if not machine_type.startswith(families):
        raise ValueError(f"machineType {machine_type!r} cannot host {accelerator} (needs {'/'.join(families)}*)")
    fixed = _FIXED_GPU_COUNT_RE.match(machine_type)
    if fixed and int(fixed.group(1)) != count:
        raise ValueError(f"machineType {machine_type} has {fixed.group(1)} GPU(s), not acceleratorCount {count}")


class ConfigError(pulumi.RunError):
    """Stack configuration is missing or invalid; the message names every offending key."""


# An image digest as registries report it (docker inspect's RepoDigests, crane digest).
_DIGEST: Final = r"^sha256:[0-9a-f]{64}$"
# Tags that move to each new push ("latest", "latest-staging"): a stack pinned to one is pinned to nothing.
_MOVING_TAG: Final = "latest"


# Longer than a GPU node's usual scale-up from zero (node, driver, image pull), so a cold pool alone does not
# spill every job; docs/scheduler.md, "Overflow to Vertex AI".
DEFAULT_OVERFLOW_AFTER_S: Final = 900.0


class _Model(BaseModel):
    # Stack YAML is camelCase like every other Pulumi config; unknown keys are typos, so they are errors.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


def _valid_cidr(value: str) -> str:
    ipaddress.ip_network(value)  # raises ValueError with the reason
    return value


Cidr = Annotated[str, AfterValidator(_valid_cidr)]


class AuthorizedNetwork(_Model):
    """An internal CIDR allowed to reach the control plane's private IP endpoint (from inside the VPC)."""

    name: str = Field(description="Label shown in the cluster's authorized-networks list.")
    cidr: Cidr = Field(description="Internal IPv4 range inside or peered with the VPC, e.g. 10.30.0.0/16 (a VPN).")

    @field_validator("cidr")
    @classmethod
    def _internal(cls, value: str) -> str:
        # The cluster has no public IP endpoint (outside clients use the DNS endpoint), so a public range here
        # would authorize nobody; GKE refuses it.
        if not ipaddress.ip_network(value).is_private:
            raise ValueError(f"{value} is not an internal range: the control plane's IP endpoint is private; "
                             "clients outside the VPC use the DNS endpoint (docs/infrastructure.md)")
        return value


class NetworkConfig(_Model):
    """VPC ranges: nodes, pods and services (VPC-native), and the private control plane's /28."""

    subnet_cidr: Cidr = Field(description="Primary range of the cluster subnet (nodes).")
    pods_cidr: Cidr = Field(description="Secondary range for pod IPs.")
    services_cidr: Cidr = Field(description="Secondary range for ClusterIP services.")
    master_cidr: Cidr = Field(description="RFC 1918 /28 for the private control plane.")
    master_authorized_networks: tuple[AuthorizedNetwork, ...] = Field(
        default=(), description="Internal ranges that may use the private IP endpoint; empty: only the DNS endpoint."
    )

    @model_validator(mode="after")
    def _ranges_do_not_overlap(self) -> NetworkConfig:
        named = {
            "subnetCidr": self.subnet_cidr,
            "podsCidr": self.pods_cidr,
            "servicesCidr": self.services_cidr,
            "masterCidr": self.master_cidr,
        }
        networks = {key: ipaddress.ip_network(value) for key, value in named.items()}
        if networks["masterCidr"].prefixlen != 28:
            raise ValueError("masterCidr must be a /28 (GKE's private control-plane range)")
        keys = list(networks)
        for i, first in enumerate(keys):
            for second in keys[i + 1:]:
                if networks[first].overlaps(networks[second]):
                    raise ValueError(f"{first} {named[first]} overlaps {second} {named[second]}")
        return self


class SystemPoolConfig(_Model):
    """The CPU pool that runs the gpu-scheduler, the Dask scheduler, the operator and monitoring."""

    machine_type: str = "e2-standard-4"
    min_nodes: int = Field(1, ge=1, description="Per zone; at least one so system pods always have a home.")
    max_nodes: int = Field(3, ge=1, description="Per zone.")
    zones: tuple[str, ...] = Field(default=(), description="Node zones; empty means all stack zones.")
    disk_size_gb: int = Field(100, ge=20)

    @model_validator(mode="after")
    def _bounds(self) -> SystemPoolConfig:
        if self.min_nodes > self.max_nodes:
            raise ValueError(f"minNodes {self.min_nodes} exceeds maxNodes {self.max_nodes}")
        return self


class GpuSharingConfig(_Model):
    """GKE GPU sharing: several containers take turns on (time-sharing) or run at once on (MPS) each GPU."""

    strategy: str = Field(gpu_options.TIME_SHARING, description="TIME_SHARING or MPS.")
    max_shared_clients_per_gpu: int = Field(description="Containers per GPU (2-48); each is one Dask worker.")
    declared: bool = Field(
        False, description="Sharing a large GPU (A100/H100) is deliberate; the policy refuses it otherwise."
    )


class ReservationConfig(_Model):
    """Which Compute Engine reservations the pool's nodes consume."""

    type: str = Field(description="NO_RESERVATION, ANY_RESERVATION or SPECIFIC_RESERVATION.")
    name: str | None = Field(None, description="The reservation (SPECIFIC_RESERVATION only); projects/P/reservations/R "
                             "for a shared one.")


# GKE counts a maintenance window only in contiguous blocks of at least 4 hours, and wants at least 48 hours of
# them in any 32-day period (https://cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions).
MIN_WINDOW_BLOCK_H: Final = 4
MIN_WINDOW_HOURS_PER_32_DAYS: Final = 48
_WEEKDAYS: Final = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")


class WeeklyWindow(_Model):
    """A weekly recurring window (UTC): ``hours`` from ``start`` on each of ``days``."""

    start: str = Field("02:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$", description="Start of each day's window, UTC.")
    hours: int = Field(6, ge=1, le=24, description="Length of each day's window.")
    days: tuple[str, ...] = Field(("SA", "SU"), min_length=1, description="Weekdays of the window (MO..SU).")

    @field_validator("days")
    @classmethod
    def _weekdays(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [day for day in value if day not in _WEEKDAYS]
        if unknown:
            raise ValueError(f"{unknown} are not weekdays; use {', '.join(_WEEKDAYS)}")
        return value

    def minutes_of_week(self) -> set[int]:
        """Every minute of the week (0 = Monday 00:00 UTC) the window covers, wrapping past Sunday midnight."""
        hour, minute = (int(part) for part in self.start.split(":"))
        week = 7 * 24 * 60
        return {(_WEEKDAYS.index(day) * 24 * 60 + hour * 60 + minute + offset) % week
                for day in set(self.days) for offset in range(self.hours * 60)}

    def contains(self, when: datetime) -> bool:
        """Whether ``when`` (aware) falls inside the window."""
        utc = when.astimezone(UTC)
        return utc.weekday() * 24 * 60 + utc.hour * 60 + utc.minute in self.minutes_of_week()

    def describe(self) -> str:
        """The window as people read it: ``TU,WE 09:00 UTC for 4 h``."""
        return f"{','.join(self.days)} {self.start} UTC for {self.hours} h"


class MaintenanceWindowConfig(WeeklyWindow):
    """When GKE may upgrade the control plane and the nodes on its own: a weekly recurring window (UTC)."""

    hours: int = Field(6, ge=MIN_WINDOW_BLOCK_H, le=24, description="Length of each day's window.")

    @model_validator(mode="after")
    def _enough_for_gke(self) -> MaintenanceWindowConfig:
        # the fewest of each weekday in any 32 days is 4
        if 4 * len(set(self.days)) * self.hours < MIN_WINDOW_HOURS_PER_32_DAYS:
            raise ValueError(f"{len(set(self.days))} day(s) x {self.hours} h a week gives GKE less than its minimum "
                             f"of {MIN_WINDOW_HOURS_PER_32_DAYS} h in 32 days; add days or hours")
        return self

    def recurring_window(self) -> tuple[str, str, str]:
        """GKE's ``(startTime, endTime, recurrence)``: a first occurrence and an RRULE repeating it."""
        hour, minute = (int(part) for part in self.start.split(":"))
        start = datetime(2026, 1, 5, hour, minute, tzinfo=UTC)  # a Monday, in the past: GKE needs only the time
        end = start + timedelta(hours=self.hours)
        stamp = "%Y-%m-%dT%H:%M:%SZ"
        return start.strftime(stamp), end.strftime(stamp), f"FREQ=WEEKLY;BYDAY={','.join(self.days)}"


class UpgradeConfig(_Model):
    """How GKE upgrades a GPU pool's nodes: surge adds nodes first, which needs GPU quota to spare."""

    max_surge: int = Field(0, ge=0, le=20, description="Extra nodes during an upgrade (needs that much spare "
                           "GPU quota and capacity).")
    max_unavailable: int = Field(1, ge=0, le=20, description="Nodes drained at once during an upgrade.")

    @model_validator(mode="after")
    def _progress(self) -> UpgradeConfig:
        if self.max_surge == 0 and self.max_unavailable == 0:
            raise ValueError("maxSurge and maxUnavailable cannot both be 0: the upgrade could never proceed")
        return self


class GpuPoolConfig(_Model):
    """One GPU node pool and the Dask worker group that runs on it."""

    name: str = Field(description="Pool name, also the Dask worker-group suffix (lowercase DNS label).")
    machine_type: str = Field(description="Machine type, e.g. n1-standard-8 for T4, a2-highgpu-1g for A100.")
    accelerator_type: str = Field(description="GKE accelerator type, e.g. nvidia-tesla-t4.")
    accelerator_count: int = Field(1, ge=1, le=16, description="GPUs per node.")
    min_nodes: int = Field(0, ge=0, description="Per zone; 0 lets the pool scale to zero when idle.")
    max_nodes: int = Field(ge=1, description="Per zone; in total for a queued pool (GKE's guide sets total limits).")
    spot: bool = Field(False, description="Spot VMs: much cheaper, may be preempted (jobs are redelivered).")
    zones: tuple[str, ...] = Field(default=(), description="Zones that offer this GPU; empty means all stack zones.")
    disk_size_gb: int = Field(200, ge=50, description="Boot disk; CUDA images are large.")
    dask_workers_min: int = Field(0, ge=0, description="DaskAutoscaler lower bound for this pool's workers.")
    dask_workers_max: int = Field(ge=1, description="DaskAutoscaler upper bound for this pool's workers.")
    gpu_sharing: GpuSharingConfig | None = Field(None, description="Time-sharing or MPS for small jobs.")
    gpu_partition_size: str | None = Field(None, description="MIG profile (A100/H100), e.g. 1g.10gb.")
    queued_provisioning: bool = Field(
        False, description="Dynamic Workload Scheduler flex-start: nodes are queued for, not spot or reserved."
    )
    max_run_duration_seconds: int | None = Field(
        None, ge=1, le=gpu_options.MAX_RUN_DURATION_S,
        description="Queued pools only: how long the nodes of one ProvisioningRequest may live (GKE's default and "
        "limit: 7 days); the scheduler then asks for new capacity while the pool still wants the workers.",
    )
    reservation: ReservationConfig | None = Field(None, description="Reservation affinity of the nodes.")
    compact_placement: bool = Field(False, description="Nodes close together (one zone, A2/A3/C2/C3/G2/N2...).")
    upgrade: UpgradeConfig = Field(UpgradeConfig(), description="Node upgrades: by default one node at a time "
                                   "with no surge, so an upgrade needs no GPU quota beyond the pool's.")

    @field_validator("name")
    @classmethod
    def _dns_label(cls, value: str) -> str:
        if not _POOL_NAME_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not a lowercase DNS label of at most 32 characters")
        if value == contract.CPU_POOL:
            raise ValueError(f"{value!r} is the always-up CPU worker's pool; name the GPU pool otherwise")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> GpuPoolConfig:
        _check_host(self.machine_type, self.accelerator_type, self.accelerator_count, ACCELERATOR_MACHINE_FAMILIES)
        if self.min_nodes > self.max_nodes:
            raise ValueError(f"minNodes {self.min_nodes} exceeds maxNodes {self.max_nodes}")
        if self.dask_workers_min > self.dask_workers_max:
            raise ValueError(f"daskWorkersMin {self.dask_workers_min} exceeds daskWorkersMax {self.dask_workers_max}")
        if self.queued_provisioning and self.dask_workers_min != 0:
            # A worker of a queued pool can only run on capacity the scheduler asked for; a standing minimum
            # would be pods that no ProvisioningRequest covers, pending forever.
            raise ValueError(f"daskWorkersMin must be 0 with queuedProvisioning (workers start only on requested "
                             f"capacity), not {self.dask_workers_min}")
        if self.max_run_duration_seconds is not None and not self.queued_provisioning:
            raise ValueError("maxRunDurationSeconds applies to queued pools only (queuedProvisioning: true)")
        # A pool without zones of its own spans the stack's: StackConfig checks those once it knows them.
        problems = gpu_options.check(self.options(zone_count=len(self.zones) or None))
        if problems:
            raise ValueError("; ".join(f"{p.key}: {p.message}" for p in problems))
        return self

    def options(self, zone_count: int | None) -> gpu_options.PoolOptions:
        """The pool as GKE's combination rules see it (nodes are repaired unless queued)."""
        return gpu_options.PoolOptions(
            machine_type=self.machine_type,
            accelerator_type=self.accelerator_type,
            accelerator_count=self.accelerator_count,
            spot=self.spot,
            min_nodes=self.min_nodes,
            sharing_strategy=self.gpu_sharing.strategy if self.gpu_sharing else None,
            max_shared_clients=self.gpu_sharing.max_shared_clients_per_gpu if self.gpu_sharing else None,
            partition_size=self.gpu_partition_size,
            queued_provisioning=self.queued_provisioning,
            auto_repair=not self.queued_provisioning,
            reservation_type=self.reservation.type if self.reservation else None,
            reservation_name=self.reservation.name if self.reservation else None,
            compact_placement=self.compact_placement,
            zone_count=zone_count,
            # components.gke renders both for every queued pool, as GKE's queued-provisioning guide does.
            flex_start=self.queued_provisioning,
            total_limits=True,
        )

    def node_capacity(self, zone_count: int) -> int:
        """Most nodes the pool can have: maxNodes per zone, or in total for a queued pool."""
        return self.max_nodes if self.queued_provisioning else self.max_nodes * zone_count

    @property
    def workers_per_node(self) -> int:
        """Dask workers a node holds: one per GPU resource it advertises when shared or partitioned, else one."""
        if not self.shares_gpus:
            return 1
        return self.accelerator_count * gpu_options.gpu_slots_per_gpu(
            self.accelerator_type, self.gpu_partition_size,
            self.gpu_sharing.max_shared_clients_per_gpu if self.gpu_sharing else None,
        )

    @property
    def shares_gpus(self) -> bool:
        """GPUs are split among containers (time-sharing, MPS or MIG), each taking one ``nvidia.com/gpu``."""
        return self.gpu_sharing is not None or self.gpu_partition_size is not None


class ImageConfig(_Model):
    """Container images, pushed by the deploy workflow to the stack's Artifact Registry repository.

    The deploy workflow sets each tag to the git SHA and each digest to what the registry answered to the
    push, so nodes pull exactly the image that was built; a tag alone can be moved under a running stack.
    """

    repository: str = Field("gpu-runtime", description="Artifact Registry repository id.")
    scheduler_tag: str = Field(description="Tag of the gpu-scheduler image (the deploy workflow sets the git SHA).")
    worker_tag: str = Field(description="Tag of the Dask GPU worker image.")
    scheduler_digest: str | None = Field(None, pattern=_DIGEST, description="sha256 digest of the scheduler image.")
    worker_digest: str | None = Field(None, pattern=_DIGEST, description="sha256 digest of the worker image.")
    operator_digest: str | None = Field(
        None, pattern=_DIGEST,
        description="sha256 digest of the Dask operator's image at the locked dask-kubernetes version "
                    "(`crane digest ghcr.io/dask/dask-kubernetes-operator:<version>`); the deploy gate requires it.")

    @field_validator("scheduler_tag", "worker_tag")
    @classmethod
    def _fixed_tag(cls, tag: str) -> str:
        if tag.startswith(_MOVING_TAG):
            raise ValueError(f"{tag!r} is a moving tag: use a release or git SHA tag (deploys add the digest)")
        return tag


class VertexConfig(_Model):
    """Vertex AI custom jobs: the GKE pools' overflow capacity, and where pinned job types always run."""

    machine_type: str = Field(description="Custom-job machine type.")
    accelerator_type: str = Field(description="Vertex accelerator enum, e.g. NVIDIA_TESLA_T4.")
    accelerator_count: int = Field(1, ge=1, le=16)
    job_types: tuple[str, ...] = Field((), description="Job types the scheduler always runs as Vertex AI custom "
                                       "jobs (pinned); empty (the default): none.")
    overflow: float | None = Field(DEFAULT_OVERFLOW_AFTER_S, ge=60, le=86400, description=(
        "Seconds a job may wait for a GKE GPU before it runs as a Vertex AI custom job instead; `off`: never. "
        "With overflow off and no jobTypes the scheduler makes no Vertex AI call and holds no Vertex AI role."))

    @field_validator("overflow", mode="before")
    @classmethod
    def _off(cls, value: object) -> object:
        # YAML 1.1 readers turn a bare `off` into False; both mean no overflow.
        return None if value is False or value == "off" else value

    @property
    def uses_vertex_ai(self) -> bool:
        """Whether the scheduler submits custom jobs (pinned types or overflow), so the stack grants the roles."""
        return bool(self.job_types) or self.overflow is not None

    @field_validator("job_types")
    @classmethod
    def _known_job_types(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        from kernels.params import JobType

        unknown = sorted(set(value) - {t.value for t in JobType})
        if unknown:
            raise ValueError(f"unknown job types {unknown}; known: {sorted(t.value for t in JobType)}")
        return value

    @field_validator("accelerator_type")
    @classmethod
    def _vertex_enum(cls, value: str) -> str:
        if value not in VERTEX_ACCELERATOR_MACHINE_FAMILIES:
            raise ValueError(f"{value!r} is not one of: {', '.join(sorted(VERTEX_ACCELERATOR_MACHINE_FAMILIES))}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> VertexConfig:
        _check_host(
            self.machine_type, self.accelerator_type, self.accelerator_count, VERTEX_ACCELERATOR_MACHINE_FAMILIES
        )
        return self


_IamMember = Annotated[str, Field(pattern=r"^(user|group|serviceAccount|domain):\S+$")]


class QueueConfig(_Model):
    """A desk's request queue (``runtime.protocol.queues``): who may publish to it, its weight and its cap."""

    name: str = Field(description="Queue name, a lowercase DNS label (topic gpu-job-request-<name>); `default` "
                                  "tunes the built-in queue, whose publishers are requestPublishers.")
    weight: int = Field(1, ge=1, le=queues.MAX_WEIGHT,
                        description="Share of the slots while several queues have work waiting.")
    max_slots: int | None = Field(None, ge=1, description="Slots this queue's jobs may hold at once; none: no cap.")
    publishers: tuple[_IamMember, ...] = Field(
        default=(), description="IAM members who may publish to this queue's topic, and only there.")

    @model_validator(mode="after")
    def _usable(self) -> QueueConfig:
        if self.name == queues.URGENT_QUEUE:
            raise ValueError("the urgent queue is built in: its publishers are urgentPublishers, and it takes no "
                             "weight or cap")
        try:
            self.spec()
        except queues.QueueError as exc:
            raise ValueError(str(exc)) from None
        if self.name == queues.DEFAULT_QUEUE and self.publishers:
            raise ValueError("the default queue's publishers are requestPublishers")
        if self.name != queues.DEFAULT_QUEUE and not self.publishers:
            raise ValueError(f"queue {self.name} names no publishers: nobody could submit to it")
        return self

    def spec(self) -> queues.QueueSpec:
        """The queue as the scheduler and the Pub/Sub component take it."""
        return queues.QueueSpec(self.name, self.weight, self.max_slots)


class StackConfig(_Model):
    """Everything one stack (staging, production) decides."""

    project: str = Field(description="GCP project id (provider config gcp:project).")
    region: str = Field(description="GCP region (provider config gcp:region).")
    zones: tuple[str, ...] = Field(min_length=1, description="Zones of the region the cluster's nodes may use.")
    network: NetworkConfig
    system_pool: SystemPoolConfig = SystemPoolConfig()
    gpu_pools: tuple[GpuPoolConfig, ...] = Field(min_length=1)
    images: ImageConfig
    scheduler_replicas: int = Field(2, ge=1, le=10, description="gpu-scheduler replicas (one leads, all consume).")
    vertex: VertexConfig
    deletion_protection: bool = Field(True, description="Protect the cluster and buckets from `pulumi destroy`.")
    release_channel: str = Field("REGULAR", description="GKE release channel.")
    maintenance_window: MaintenanceWindowConfig = Field(
        MaintenanceWindowConfig(), description="When GKE may upgrade on its own (the stack's maintenance window).")
    deploy_window: WeeklyWindow | None = Field(
        None, description="When the deploy workflow may deploy the stack without an explicit override; never "
        "inside the maintenance window, where GKE's own upgrades hold cluster operations. None: any time.")
    result_retention_days: int = Field(30, ge=1, description="Result objects older than this are deleted.")
    request_publishers: tuple[_IamMember, ...] = Field(
        default=(), description="IAM members who may publish job requests (roles/pubsub.publisher on "
        "gpu-job-request only): the platform's users. Nobody else may publish to any of its topics.")
    queues: tuple[QueueConfig, ...] = Field(
        default=(), description="Request queues of the desks sharing the platform, each with its own topic, "
        "publishers, weight and optional slot cap (docs/scheduler.md, Queues).")
    urgent_publishers: tuple[_IamMember, ...] = Field(
        default=(), description="IAM members (on-call operators) who may publish to the urgent queue, whose jobs "
        "go ahead of every backlog; the deploy's own probe may publish there too.")
    replace_gpu_pools: tuple[str, ...] = Field(
        default=(), description="GPU pools whose replacement this deploy acknowledges: they lose Pulumi's protect "
        "for it (docs/runbooks/replace-gpu-pool.md). Empty in normal operation."
    )

    @field_validator("release_channel")
    @classmethod
    def _known_channel(cls, value: str) -> str:
        if value not in RELEASE_CHANNELS:
            raise ValueError(f"{value!r} is not one of {', '.join(RELEASE_CHANNELS)}")
        return value

    @model_validator(mode="after")
    def _zones_and_pools(self) -> StackConfig:
        for zone in self.zones:
            if not zone.startswith(f"{self.region}-"):
                raise ValueError(f"zone {zone} is not in region {self.region}")
        names = [pool.name for pool in self.gpu_pools]
        if len(set(names)) != len(names):
            raise ValueError(f"gpuPools names must be unique, got {names}")
        for pool in self.gpu_pools:
            stray = set(pool.zones) - set(self.zones)
            if stray:
                raise ValueError(f"gpuPools[{pool.name}].zones {sorted(stray)} are not among the stack zones")
        for pool in self.gpu_pools:
            zones = len(self.pool_zones(pool))
            if not pool.zones and (problems := gpu_options.check(pool.options(zones))):
                raise ValueError("; ".join(f"gpuPools[{pool.name}].{p.key}: {p.message}" for p in problems))
            # One Dask worker per node, or per shared GPU slot: more workers than that could never be scheduled.
            capacity = pool.node_capacity(zones) * pool.workers_per_node
            if pool.dask_workers_max > capacity:
                nodes = (f"maxNodes {pool.max_nodes} in total" if pool.queued_provisioning
                         else f"maxNodes {pool.max_nodes} x {zones} zones")
                raise ValueError(
                    f"gpuPools[{pool.name}].daskWorkersMax {pool.dask_workers_max} exceeds the pool's node capacity "
                    f"{capacity} ({nodes} x {pool.workers_per_node} worker(s) per node)"
                )
        stray = set(self.replace_gpu_pools) - set(names)
        if stray:
            raise ValueError(f"replaceGpuPools names {sorted(stray)}, which are not gpuPools ({', '.join(names)})")
        stray = set(self.system_pool.zones) - set(self.zones)
        if stray:
            raise ValueError(f"systemPool.zones {sorted(stray)} are not among the stack zones")
        try:
            self.queue_specs()
        except queues.QueueError as exc:
            raise ValueError(f"queues: {exc}") from None
        if self.deploy_window is not None and (
                self.deploy_window.minutes_of_week() & self.maintenance_window.minutes_of_week()):
            raise ValueError(f"deployWindow ({self.deploy_window.describe()}) overlaps maintenanceWindow "
                             f"({self.maintenance_window.describe()}), when GKE upgrades on its own: move one")
        return self

    def queue_specs(self) -> tuple[queues.QueueSpec, ...]:
        """Every request queue of the stack: the declared ones with the built-in default and urgent queues."""
        return queues.with_built_ins(queue.spec() for queue in self.queues)

    def queue_publishers(self) -> dict[str, tuple[str, ...]]:
        """Who may publish to each queue's topic, by queue name."""
        declared = {queue.name: queue.publishers for queue in self.queues if queue.name != queues.DEFAULT_QUEUE}
        return {queues.DEFAULT_QUEUE: self.request_publishers, **declared,
                queues.URGENT_QUEUE: self.urgent_publishers}

    def queued_pools(self) -> dict[str, int | None]:
        """The pools with queued provisioning, each with its requests' maxRunDurationSeconds (None: GKE's)."""
        return {pool.name: pool.max_run_duration_seconds for pool in self.gpu_pools if pool.queued_provisioning}

    def pool_zones(self, pool: GpuPoolConfig | SystemPoolConfig) -> tuple[str, ...]:
        """The zones a node pool uses: its own list, or all the stack's zones."""
        return pool.zones or self.zones

    def image(self, name: str, tag: str, digest: str | None = None) -> str:
        """Full Artifact Registry reference of an image of this stack, pinned to ``digest`` when given."""
        reference = f"{self.region}-docker.pkg.dev/{self.project}/{self.images.repository}/{name}:{tag}"
        return f"{reference}@{digest}" if digest else reference


# Provider keys the program reads, and where they live in the validated model.
_PROVIDER_KEYS: Final = {"project": "gcp:project", "region": "gcp:region"}


def _key(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as the stack file spells the key: ``gpu-runtime:gpuPools[0].name``."""
    if not loc:
        return f"{PROJECT_NAMESPACE} config"
    head, *rest = loc
    key = _PROVIDER_KEYS.get(str(head)) or f"{PROJECT_NAMESPACE}:{head}"
    return key + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in rest)


def _message(error: Mapping[str, Any]) -> str:
    """Pydantic's message in the project's words, for the kinds of mistake a stack file makes."""
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "missing":
        return "is required but not set"
    if kind == "too_short":
        return f"needs at least {ctx.get('min_length', 1)} entry, but the file gives {ctx.get('actual_length', 0)}"
    if kind == "extra_forbidden":
        return "is not a setting of this project (misspelt? Pulumi.yaml lists the settings)"
    if kind == "string_pattern_mismatch":
        return f"{error.get('input')!r} does not have the form {ctx.get('pattern')}"
    if kind in _BOUNDS:
        return f"is {error.get('input')!r}, but must be {_BOUNDS[kind]} {next(iter(ctx.values()), '?')}"
    if kind in ("literal_error", "enum"):
        return f"is {error.get('input')!r}, but must be one of {ctx.get('expected', '?')}"
    if kind == "too_long":
        return f"allows at most {ctx.get('max_length')} entries, but the file gives {ctx.get('actual_length')}"
    expected = next((what for prefix, what in _TYPES.items() if kind.startswith(prefix)), None)
    if expected is not None:
        return f"is {error.get('input')!r}, but must be {expected}"
    return str(error["msg"]).removeprefix("Value error, ")


# Pydantic's error kinds a stack file meets, in the project's words (``_message``).
_BOUNDS: Final = {"greater_than": "more than", "greater_than_equal": "at least", "less_than": "less than",
                  "less_than_equal": "at most"}
_TYPES: Final = {"int_": "a whole number", "float_": "a number", "bool_": "true or false",
                 "string_": "a string", "list_": "a list", "tuple_": "a list", "dict_": "a mapping of keys",
                 "model_": "a mapping of keys"}


def parse_stack_config(raw: Mapping[str, Any], project: str | None, region: str | None,
                       source: str = "the stack config") -> StackConfig:
    """Validate raw project-namespace config (camelCase keys) plus the provider's project and region.

    Raises ``ConfigError`` listing every problem as ``gpu-runtime:key.path: message``, naming ``source`` (the
    stack file). Documentation address ranges and placeholder values are refused before anything else.
    """
    missing = [key for key, value in (("gcp:project", project), ("gcp:region", region)) if not value]
    if missing:
        raise ConfigError(f"missing stack config in {source}: {', '.join(missing)}")
    values = {**raw, "project": project, "region": region}
    stand_ins = [f"{_key(loc)}: {reason}" for loc, reason in placeholders.find(values)]
    if stand_ins:
        raise ConfigError(f"{source} still holds placeholder values; set real ones:\n  " + "\n  ".join(stand_ins))
    try:
        return StackConfig.model_validate(values)
    except ValidationError as exc:
        errors = exc.errors()
        # Pydantic also counts a list whose entries failed as too short: the entries' own errors say more.
        inner = {err["loc"][:n] for err in errors for n in range(len(err["loc"]))}
        problems = [f"{_key(err['loc'])}: {_message(err)}" for err in errors
                    if not (err["type"] == "too_short" and err["loc"] in inner)]
        raise ConfigError(f"invalid stack config in {source}:\n  " + "\n  ".join(problems)) from None


def load_stack_config() -> StackConfig:
    """Read the running stack's config (``gcp:*`` provider keys and the ``gpu-runtime:*`` keys)."""
    gcp = pulumi.Config("gcp")
    config = pulumi.Config(PROJECT_NAMESPACE)
    raw: dict[str, Any] = {}
    try:
        for key in _OBJECT_KEYS:
            if (value := config.get_object(key)) is not None:
                raw[key] = value
        for key in _INT_KEYS:
            if (value := config.get_int(key)) is not None:
                raw[key] = value
        for key in _BOOL_KEYS:
            if (value := config.get_bool(key)) is not None:
                raw[key] = value
        for key in _STRING_KEYS:
            if (value := config.get(key)) is not None:
                raw[key] = value
    except pulumi.ConfigTypeError as exc:
        raise ConfigError(f"{stack_file()}: {exc}") from None
    return parse_stack_config(raw, gcp.get("project"), gcp.get("region"), source=stack_file())


def stack_file() -> str:
    """The file the running stack's config comes from (``Pulumi.<stack>.yaml``)."""
    return f"Pulumi.{pulumi.get_stack()}.yaml"


def load_control_token() -> pulumi.Output[str]:
    """The control-API bearer token, which must be a Pulumi secret (``pulumi config set --secret``)."""
    try:
        return pulumi.Config(PROJECT_NAMESPACE).require_secret(CONTROL_TOKEN_KEY)
    except pulumi.ConfigMissingError:
        raise ConfigError(
            f"missing secret {PROJECT_NAMESPACE}:{CONTROL_TOKEN_KEY}; set it with "
            f"`pulumi config set --secret {CONTROL_TOKEN_KEY} $(openssl rand -hex 32)`"
        ) from None
