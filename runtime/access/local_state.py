"""The local platform's state file: where its processes run and how to reach them.

``.gpurt/local/state.json`` is written by ``gpurt local up`` and read by every other command (and by the
validation helper) to find the API, the emulator and the control token. It holds a secret, so it is
created with mode 0600 and never logged.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import psutil
from pydantic import BaseModel, ConfigDict, Field, model_validator

from runtime.access.local_monitoring import MonitoringInfo
from runtime.protocol.queues import BUILT_IN_QUEUES, QueueSpec

# The first scheduler replica's name; state files written before replicas existed know only it.
FIRST_SCHEDULER: Final = "scheduler"
# The local stand-in of the Vertex AI custom-jobs API (runtime/local/vertex_api.py), by its process name.
VERTEX_API: Final = "vertex-api"
# Overrides where the local platform keeps its state and logs (default: ./.gpurt/local).
LOCAL_DIR_ENV: Final = "GPURT_LOCAL_DIR"
STATE_FILE: Final = "state.json"
STATE_FILE_MODE: Final = 0o600  # the file carries the control token


class ProcessRecord(BaseModel):
    """One background process of the local platform."""

    model_config = ConfigDict(frozen=True)

    name: str
    pid: int
    create_time: float = Field(description="psutil create time, so a recycled pid is never mistaken for ours.")
    log_path: Path
    command: list[str]
    # What it takes to start the process again (``gpurt local restart-scheduler``): the settings it was
    # given on top of the caller's environment (the control token's file, never the token: a replica's
    # environment is inherited by its Dask processes) and its working directory.
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    cwd: Path | None = None
    api_url: str | None = Field(None, description="The scheduler replica's API; None for other processes.")


class LocalState(BaseModel):
    """Everything a client needs to use a running local platform."""

    model_config = ConfigDict(frozen=True)

    project: str
    api_url: str
    emulator_host: str = Field(description="host:port for PUBSUB_EMULATOR_HOST.")
    emulator_admin_url: str | None = None
    emulator_rest_url: str | None = Field(None, description="The broker's Pub/Sub REST (v1 JSON) root.")
    control_token: str = Field(repr=False)
    # The builtin broker's tokens (runtime/local/broker_credentials.py); None from a platform started before
    # the broker took credentials, whose broker answers everyone.
    broker_token: str | None = Field(None, repr=False, description="The operator's: every broker call.")
    broker_user_token: str | None = Field(None, repr=False,
                                          description="A user's: publish requests, read results on its own "
                                          "subscriptions.")
    broker_queue_tokens: dict[str, str] = Field(
        default_factory=dict, repr=False,
        description="By request queue but default: its publishers' token (a desk, and urgent for on-call), which "
        "may publish to that queue's topic alone and read results on its own subscriptions.")
    queues: tuple[QueueSpec, ...] = Field(BUILT_IN_QUEUES, description="The request queues the platform runs.")
    result_store: str
    workers: int | None = Field(None, description="Requested Dask workers; None: the scheduler's default.")
    processes: list[ProcessRecord]
    lease_file: Path | None = Field(None, description="The replicas' shared leader lease; None: one replica.")
    monitoring: MonitoringInfo | None = Field(None, description="Prometheus and Alertmanager; None: not started.")
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @model_validator(mode="before")
    @classmethod
    def _scheduler_api_from_older_state(cls, data: Any) -> Any:
        # A platform started before replicas existed records its one scheduler without ``api_url``: it is
        # the state's own API, and treating it as "no scheduler" would skip its drain at ``down``.
        if isinstance(data, dict) and isinstance(data.get("processes"), list):
            data = {**data, "processes": [
                {**p, "api_url": data.get("api_url")}
                if isinstance(p, dict) and p.get("name") == FIRST_SCHEDULER and not p.get("api_url") else p
                for p in data["processes"]]}
        return data

    def process(self, name: str) -> ProcessRecord | None:
        """The record of the process called ``name``, if any."""
        return next((p for p in self.processes if p.name == name), None)

    def schedulers(self) -> list[ProcessRecord]:
        """The scheduler replicas, first one first (its API is ``api_url``)."""
        return [p for p in self.processes if p.api_url is not None]


def default_local_dir() -> Path:
    """The local platform's folder: ``$GPURT_LOCAL_DIR`` or ``./.gpurt/local``."""
    override = os.environ.get(LOCAL_DIR_ENV)
    return Path(override) if override else Path.cwd() / ".gpurt" / "local"


def save_state(state: LocalState, directory: Path) -> Path:
    """Write ``state`` atomically with mode 0600 and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / STATE_FILE
    # A temporary file per writer: two commands saving at once must not rename each other's half-written file.
    tmp = path.with_name(f".{STATE_FILE}.{os.getpid()}.{threading.get_ident()}.tmp")
    # Create the file with the final mode, so the token is never readable by others even for an instant.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, STATE_FILE_MODE)
    with os.fdopen(fd, "w") as handle:
        handle.write(state.model_dump_json(indent=2))
    os.chmod(tmp, STATE_FILE_MODE)
    os.replace(tmp, path)
    return path


def load_state(directory: Path) -> LocalState | None:
    """The saved state, or ``None`` when no local platform was started from ``directory``."""
    path = directory / STATE_FILE
    if not path.exists():
        return None
    try:
        return LocalState.model_validate(json.loads(path.read_text()))
    except (ValueError, OSError) as exc:
        raise StateError(f"{path} is unreadable ({exc}); remove it and run `gpurt local up` again") from None


def clear_state(directory: Path) -> None:
    """Remove the state file (logs stay, for the post-mortem)."""
    (directory / STATE_FILE).unlink(missing_ok=True)


class StateError(RuntimeError):
    """The state file exists but cannot be used."""


def running_process(record: ProcessRecord) -> psutil.Process | None:
    """The process of ``record`` if it still runs: same pid and start time (a recycled pid is not ours)."""
    try:
        proc = psutil.Process(record.pid)
        if abs(proc.create_time() - record.create_time) > 0.01 or proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except psutil.NoSuchProcess:
        return None


def is_alive(record: ProcessRecord) -> bool:
    """Whether the process of ``record`` still runs (and is the same process, not a recycled pid)."""
    return running_process(record) is not None
