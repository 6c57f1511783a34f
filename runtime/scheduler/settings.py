"""The gpu-scheduler's settings, read once from the environment.

The local platform and the Kubernetes manifests set exactly these variables; their names are the
interface, declared once in the platform contract (``contract.SchedulerEnv``), which both writers use too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from runtime.protocol import contract
from runtime.protocol.queues import BUILT_IN_QUEUES, QueueError, QueueSpec, decode

DEFAULT_PROJECT: Final = "gpurt-local"
DEFAULT_RESULT_DIR: Final = Path(".gpurt/results")
DEFAULT_LOCAL_WORKERS: Final = 2
DEFAULT_VERTEX_MACHINE: Final = "n1-standard-8"
DEFAULT_VERTEX_ACCELERATOR: Final = "NVIDIA_TESLA_T4"
ENV: Final = contract.SchedulerEnv


class PoolsBackend(StrEnum):
    LOCAL = "local"  # worker groups of the local Dask cluster this process starts
    KUBERNETES = "kubernetes"  # the DaskCluster's worker groups (dask-kubernetes operator)
    EXTERNAL = "external"  # a Dask cluster the platform does not manage, at GPURT_DASK_SCHEDULER


class LeaderMode(StrEnum):
    ALWAYS = "always"  # one replica, no election (the local platform)
    KUBERNETES = "kubernetes"  # a coordination.k8s.io Lease decides
    FILE = "file"  # a lease file shared by replicas on one machine (gpurt local up --replicas N)


class ExecutionBackendName(StrEnum):
    DASK = "dask"
    VERTEX = contract.VERTEX_BACKEND


class SettingsError(ValueError):
    """The environment holds a setting the service cannot run with; the message names it."""


class Settings(BaseModel):
    """Environment settings of the service (see docs/scheduler.md for the table)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read the settings from ``environ`` (default: the process environment); empty values mean unset."""
        env = os.environ if environ is None else environ
        values = {key: value for key, value in env.items() if value != "" and key in _ENV_NAMES}
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            reasons = "; ".join(_reason(e) for e in exc.errors(include_url=False))
            raise SettingsError(f"invalid gpu-scheduler settings: {reasons}") from None

    pubsub_emulator_host: str | None = Field(None, validation_alias=ENV.PUBSUB_EMULATOR_HOST)
    pubsub_emulator_token_file: Path | None = Field(
        None, validation_alias=ENV.PUBSUB_EMULATOR_TOKEN_FILE,
        description="A file holding this scheduler's bearer token for the emulator (the local broker's "
        "credentials); read at start. Unset: no token is sent.")
    project: str = Field(DEFAULT_PROJECT, validation_alias=ENV.PROJECT, min_length=1)
    dask_scheduler: str = Field("", validation_alias=ENV.DASK_SCHEDULER,
                                description="Dask scheduler address; empty starts a local Dask cluster (a Dask "
                                "scheduler process and Nanny workers).")
    local_workers: int | None = Field(None, validation_alias=ENV.LOCAL_WORKERS, ge=1, le=256,
                                      description="Workers of the local pool; default one per GPU, else 2.")
    local_gpus: int | None = Field(None, validation_alias=ENV.LOCAL_GPUS, ge=0, le=64,
                                   description="GPUs the local workers share; default: what nvidia-smi lists.")
    result_store: str = Field("", validation_alias=ENV.RESULT_STORE,
                              description="fsspec URL of the result store; empty means .gpurt/results here.")
    control_token: str | None = Field(None, validation_alias=ENV.CONTROL_TOKEN, repr=False)
    control_token_file: Path | None = Field(None, validation_alias=ENV.CONTROL_TOKEN_FILE,
                                            description="A file holding the control token (the mounted Secret); "
                                            "read at start, it wins over the variable.")
    host: str = Field("127.0.0.1", validation_alias=ENV.HOST)
    port: int = Field(contract.SCHEDULER_PORT, validation_alias=ENV.PORT, ge=0, le=65535)
    probe_port: int | None = Field(None, validation_alias=ENV.PROBE_PORT, ge=0, le=65535,
                                   description="Port of the probes' own listener (/healthz, /readyz), outside the "
                                   "API's connection cap; 0: any free one; unset: none (the probes stay on the "
                                   "API port only).")
    pools: PoolsBackend = Field(PoolsBackend.LOCAL, validation_alias=ENV.POOLS)
    leader: LeaderMode = Field(LeaderMode.ALWAYS, validation_alias=ENV.LEADER)
    lease_file: Path | None = Field(None, validation_alias=ENV.LEASE_FILE,
                                    description=f"The shared lease file when {ENV.LEADER}=file.")
    max_in_flight: int | None = Field(None, validation_alias=ENV.MAX_IN_FLIGHT, ge=1, le=10_000,
                                      description="GPU slots; unset means what the pools report (at least 1).")
    queues: tuple[QueueSpec, ...] = Field(
        BUILT_IN_QUEUES, validation_alias=ENV.QUEUES,
        description="The request queues consumed and sharing the slots, as JSON (runtime.protocol.queues.encode); "
        "unset: the built-in default and urgent queues.")
    backend: ExecutionBackendName = Field(ExecutionBackendName.DASK, validation_alias=ENV.BACKEND)
    vertex_types: frozenset[str] = Field(frozenset(), validation_alias=ENV.VERTEX_TYPES,
                                         description="Job types routed to Vertex AI (comma-separated).")
    vertex_region: str = Field("us-central1", validation_alias=ENV.VERTEX_REGION)
    vertex_image: str = Field("", validation_alias=ENV.VERTEX_IMAGE)
    vertex_machine_type: str = Field(DEFAULT_VERTEX_MACHINE, validation_alias=ENV.VERTEX_MACHINE_TYPE)
    vertex_accelerator: str = Field(DEFAULT_VERTEX_ACCELERATOR, validation_alias=ENV.VERTEX_ACCELERATOR)
    vertex_accelerator_count: int = Field(1, validation_alias=ENV.VERTEX_ACCELERATOR_COUNT, ge=1, le=16)
    vertex_service_account: str | None = Field(None, validation_alias=ENV.VERTEX_SERVICE_ACCOUNT)
    vertex_spill_after_s: float | None = Field(None, validation_alias=ENV.VERTEX_SPILL_AFTER_S, gt=0,
                                               description="Seconds a job may wait for a Dask worker before it "
                                               "runs as a Vertex AI custom job instead; unset: never.")
    vertex_poll_s: float = Field(15.0, validation_alias=ENV.VERTEX_POLL_S, gt=0, le=600,
                                 description="Seconds between polls of a running custom job (a GPU machine takes "
                                 "minutes to provision: polling faster only spends API quota).")
    vertex_endpoint: str = Field("", validation_alias=ENV.VERTEX_ENDPOINT,
                                 description="Base URL of the custom-jobs API; empty: the regional Google "
                                 "endpoint (the local platform sets its stand-in).")
    device: str = Field("auto", validation_alias=ENV.DEVICE,
                        description="Device the kernels run on: auto, cpu or gpu.")
    warm_workers: bool = Field(True, validation_alias=ENV.WARM_WORKERS,
                               description="Local Dask workers compile every kernel as they start, before their first "
                               "kernel job.")
    require_gpu: bool = Field(False, validation_alias=ENV.REQUIRE_GPU,
                              description="Kernel jobs always wait for a GPU worker (the cloud, where a CPU worker "
                              "runs only GPU-free jobs); off, they run on CPU workers when no GPU worker exists.")
    shard_paths: int | None = Field(None, validation_alias=ENV.SHARD_PATHS, ge=1,
                                    description="Jobs over this many paths run as shards on several workers; "
                                    "unset: never.")
    dask_cluster_name: str = Field(contract.DASK_CLUSTER_NAME, validation_alias=ENV.DASK_CLUSTER)
    queued_pools: dict[str, int | None] = Field(
        default_factory=dict, validation_alias=ENV.QUEUED_POOLS,
        description="Pools whose nodes come only through ProvisioningRequests: pool[=maxRunDurationSeconds],...")
    pod_name: str = Field(default_factory=lambda: os.uname().nodename,
                          validation_alias=AliasChoices(ENV.POD_NAME, ENV.LOCAL_POD_NAME))
    pod_namespace: str = Field(contract.RUNTIME_NAMESPACE, validation_alias=ENV.POD_NAMESPACE)
    log_level: str = Field("INFO", validation_alias=ENV.LOG_LEVEL)
    log_max_bytes: int | None = Field(None, validation_alias=ENV.LOG_MAX_BYTES, ge=64 * 1024,
                                      description="When stderr is a file, keep it under this many bytes (its "
                                      "newest half kept); unset: no cap (in the cloud the logs go to Cloud "
                                      "Logging, not a file).")
    emulator_admin_url: str = Field("", validation_alias=ENV.EMULATOR_ADMIN_URL,
                                    description="The local emulator's admin URL, for backlog and DLQ depth.")
    tracemalloc_dir: Path | None = Field(None, validation_alias=ENV.TRACEMALLOC_DIR,
                                         description="Set: trace allocations and write tracemalloc snapshots "
                                         "here (a leak hunt; costs CPU and memory).")
    tracemalloc_period_s: float = Field(60.0, validation_alias=ENV.TRACEMALLOC_PERIOD_S, ge=1.0,
                                        description="Seconds between tracemalloc snapshots.")
    tracemalloc_keep: int = Field(10, validation_alias=ENV.TRACEMALLOC_KEEP, ge=1, le=10_000,
                                  description="Newest tracemalloc snapshots kept besides the first.")
    dask_dashboard: str = Field("127.0.0.1:0", validation_alias=ENV.DASK_DASHBOARD,
                                description="host:port of the local Dask scheduler's dashboard, which "
                                "also serves Dask's Prometheus /metrics (port 0: any free one).")

    @model_validator(mode="before")
    @classmethod
    def _token_from_file(cls, data: object) -> object:
        # Read here, once, so the rest of the service sees one token whichever way it came.
        if not isinstance(data, dict) or not data.get(ENV.CONTROL_TOKEN_FILE):
            return data
        path = Path(data[ENV.CONTROL_TOKEN_FILE])
        try:
            token = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{ENV.CONTROL_TOKEN_FILE}: cannot read {path}: {exc}") from None
        if not token:
            raise ValueError(f"{ENV.CONTROL_TOKEN_FILE}: {path} is empty")
        return {**data, ENV.CONTROL_TOKEN: token}

    @field_validator("vertex_types", mode="before")
    @classmethod
    def _split_types(cls, value: object) -> object:
        if isinstance(value, str):
            return frozenset(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("vertex_types")
    @classmethod
    def _known_types(cls, value: frozenset[str]) -> frozenset[str]:
        from kernels.params import JobType

        unknown = sorted(value - {t.value for t in JobType})
        if unknown:
            raise ValueError(f"unknown job types {unknown}; known: {[t.value for t in JobType]}")
        return value

    @field_validator("queues", mode="before")
    @classmethod
    def _decode_queues(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        try:
            return decode(value)
        except QueueError as exc:  # pydantic shows a ValueError's message after the variable's name
            raise ValueError(str(exc)) from None

    @field_validator("queued_pools", mode="before")
    @classmethod
    def _split_queued(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        pools: dict[str, int | None] = {}
        for part in (p.strip() for p in value.split(",")):
            if not part:
                continue
            pool, _, seconds = part.partition("=")
            if not seconds.strip():
                pools[pool.strip()] = None
            elif seconds.strip().isdigit() and int(seconds) > 0:
                pools[pool.strip()] = int(seconds)
            else:
                raise ValueError(f"{part!r}: maxRunDurationSeconds must be a positive number of seconds")
        return pools

    @model_validator(mode="after")
    def _external_cluster_has_an_address(self) -> Settings:
        if self.pools is PoolsBackend.EXTERNAL and not self.dask_scheduler:
            raise ValueError(f"{ENV.POOLS}=external needs {ENV.DASK_SCHEDULER}, the external Dask scheduler's "
                             "address (tcp://HOST:8786)")
        return self

    @model_validator(mode="after")
    def _probe_port_is_not_the_api_port(self) -> Settings:
        if self.probe_port and self.probe_port == self.port:
            raise ValueError(f"{ENV.PROBE_PORT} must differ from {ENV.PORT} ({self.port}): the probes' listener "
                             "exists to stay out of the API's connection cap")
        return self

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        level = value.upper()
        if level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError(f"{ENV.LOG_LEVEL} must be DEBUG, INFO, WARNING, ERROR or CRITICAL, not {value!r}")
        return level

    def result_store_url(self) -> str:
        """The store URL, with the local default resolved to an absolute ``file://`` URL."""
        if self.result_store:
            if "://" not in self.result_store:
                return Path(self.result_store).resolve().as_uri()
            return self.result_store
        return DEFAULT_RESULT_DIR.resolve().as_uri()


def _reason(error: Any) -> str:
    """``VARIABLE: why``; a check of several settings at once names its variables itself."""
    message = str(error["msg"]).removeprefix("Value error, ")
    if not error["loc"]:
        return message
    return f"{_alias(error['loc'])}: {message}"


def _alias(loc: tuple[object, ...]) -> str:
    name = str(loc[0]) if loc else "?"
    field = Settings.model_fields.get(name)
    alias = field.validation_alias if field else None
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return str(alias or name)


def _env_names() -> frozenset[str]:
    names: set[str] = set()
    for field in Settings.model_fields.values():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(str(choice) for choice in alias.choices)
        elif alias:
            names.add(str(alias))
    return frozenset(names)


_ENV_NAMES: Final = _env_names()


def detect_gpus() -> int:
    """GPUs ``nvidia-smi -L`` lists (0 without the tool). The scheduler itself never opens a CUDA context."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return 0
    try:
        listing = subprocess.run([tool, "-L"], capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in listing.splitlines() if line.startswith("GPU "))
