"""The maintenance mode every scheduler replica follows, kept where a restarted replica finds it.

A drain is the platform's, not one replica's: ``POST /control/maintenance`` reaches whichever replica the
Service picks, so the mode is written to a shared record (``ModeStore``) that every replica reads when it starts
(a pod of a rolling restart comes up drained) and follows every ``FOLLOW_PERIOD_S``. Each replica writes back its
own report (the mode it follows, its jobs in flight), so ``gpurt maintenance drain --wait`` waits for every
replica through any one of them. The record is the ConfigMap ``contract.MAINTENANCE_CONFIGMAP`` in the
scheduler's namespace (the deploy creates it; the scheduler may only read and patch it), or, for the local
platform's replicas, a JSON file beside their lease file; a single unelected replica keeps it in memory.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, Protocol

from runtime.leases.file import locked, write_atomically
from runtime.protocol import contract

# How often a replica reads the shared mode and reports its own (seconds): a drain reaches every replica
# within this, which an operator waiting for in-flight jobs never notices.
FOLLOW_PERIOD_S: Final = 2.0
# A report older than this is a replica that is gone (a rolling restart's old pod): left out and removed.
REPORT_STALE_S: Final = 10 * FOLLOW_PERIOD_S
MODE_KEY: Final = "mode"
REPLICA_PREFIX: Final = "replica."
MAINTENANCE_FILE: Final = "maintenance.json"


class ModeStoreError(Exception):
    """The shared record could not be read or written (the API server or the file is unreachable)."""


class Mode(StrEnum):
    NORMAL = "normal"
    DRAIN = "drain"


@dataclass(frozen=True)
class ReplicaReport:
    """What one replica last said: the mode it follows and its jobs in flight (running or held to start)."""

    mode: Mode
    in_flight: int
    reported_at: datetime

    def to_json(self) -> dict[str, Any]:
        """The report as stored and as ``GET /status`` shows it."""
        return {"mode": self.mode.value, "in_flight": self.in_flight, "reported_at": self.reported_at.isoformat()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReplicaReport:
        """A stored report; ValueError or KeyError when it is not one."""
        return cls(Mode(data["mode"]), int(data["in_flight"]), datetime.fromisoformat(data["reported_at"]))


@dataclass(frozen=True)
class SharedMode:
    """The shared record: the platform's mode and every replica's report."""

    mode: Mode = Mode.NORMAL
    replicas: Mapping[str, ReplicaReport] = field(default_factory=dict)

    def fresh(self, now: datetime) -> dict[str, ReplicaReport]:
        """Reports of replicas still alive (reported within ``REPORT_STALE_S``)."""
        return {name: r for name, r in self.replicas.items()
                if now - r.reported_at <= timedelta(seconds=REPORT_STALE_S)}


class ModeStore(Protocol):
    """Where the shared mode lives; every method raises ``ModeStoreError`` when it cannot reach it."""

    def read(self) -> SharedMode:
        """The record; the normal mode and no reports when nothing was written yet."""

    def set_mode(self, mode: Mode) -> None:
        """Write the platform's mode."""

    def report(self, replica: str, report: ReplicaReport) -> None:
        """Write ``replica``'s report and remove stale ones."""


def _decode(values: Mapping[str, str]) -> SharedMode:
    """The record from its flat form (ConfigMap data: string keys and values); unreadable reports are dropped."""
    replicas = {}
    for key, value in values.items():
        if key.startswith(REPLICA_PREFIX):
            try:
                replicas[key.removeprefix(REPLICA_PREFIX)] = ReplicaReport.from_json(json.loads(value))
            except (ValueError, KeyError, TypeError):
                continue
    return SharedMode(Mode(values.get(MODE_KEY) or Mode.NORMAL), replicas)


def _stale_keys(shared: SharedMode, now: datetime) -> list[str]:
    fresh = shared.fresh(now)
    return [REPLICA_PREFIX + name for name in shared.replicas if name not in fresh]


class InMemoryModeStore:
    """The record of a single replica (nothing to share) and of tests."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}
        self._lock = threading.Lock()

    def read(self) -> SharedMode:
        with self._lock:
            return _decode(self._values)

    def set_mode(self, mode: Mode) -> None:
        with self._lock:
            self._values[MODE_KEY] = mode.value

    def report(self, replica: str, report: ReplicaReport) -> None:
        with self._lock:
            for key in _stale_keys(_decode(self._values), report.reported_at):
                self._values.pop(key, None)
            self._values[REPLICA_PREFIX + replica] = json.dumps(report.to_json())


class FileModeStore:
    """The record in a JSON file, for replicas on one machine: each write holds the file's ``flock`` and lands
    whole (``runtime.leases.file``)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def read(self) -> SharedMode:
        return _decode(self._values())

    def _values(self) -> dict[str, str]:
        try:
            return dict(json.loads(self.path.read_text()))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ModeStoreError(f"{self.path}: {exc}") from None

    def set_mode(self, mode: Mode) -> None:
        self._update(lambda values: {**values, MODE_KEY: mode.value})

    def report(self, replica: str, report: ReplicaReport) -> None:
        def update(values: dict[str, str]) -> dict[str, str]:
            stale = _stale_keys(_decode(values), report.reported_at)
            return {**{k: v for k, v in values.items() if k not in stale},
                    REPLICA_PREFIX + replica: json.dumps(report.to_json())}

        self._update(update)

    def _update(self, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        try:
            with locked(self.path):
                write_atomically(self.path, json.dumps(change(self._values())))
        except OSError as exc:
            raise ModeStoreError(f"{self.path}: {exc}") from None


class ConfigMapModeStore:
    """The record in the ConfigMap ``name`` of ``namespace``, through ``kubernetes.client.CoreV1Api``.

    Each write patches its own keys only (``mode``, or ``replica.<pod>``), so replicas never overwrite each
    other's reports: the client sends a dict body as a strategic merge patch (``kubernetes/client/rest.py``), which
    merges a map such as ``data`` key by key and removes a key set to null
    (https://kubernetes.io/docs/tasks/manage-kubernetes-objects/update-api-object-kubectl-patch/). The ConfigMap is
    the deploy's: the scheduler's Role names it for ``get`` and ``patch`` and cannot create it.
    """

    def __init__(self, api: Any, namespace: str, name: str = contract.MAINTENANCE_CONFIGMAP) -> None:
        self._api = api
        self._namespace = namespace
        self._name = name

    def read(self) -> SharedMode:
        config_map = self._call(lambda: self._api.read_namespaced_config_map(self._name, self._namespace))
        return _decode(config_map.data or {})

    def set_mode(self, mode: Mode) -> None:
        self._patch({MODE_KEY: mode.value})

    def report(self, replica: str, report: ReplicaReport) -> None:
        stale = _stale_keys(self.read(), report.reported_at)
        self._patch({**dict.fromkeys(stale), REPLICA_PREFIX + replica: json.dumps(report.to_json())})

    def _patch(self, data: Mapping[str, str | None]) -> None:
        self._call(lambda: self._api.patch_namespaced_config_map(self._name, self._namespace, {"data": dict(data)}))

    def _call(self, request: Callable[[], Any]) -> Any:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        try:
            return request()
        except (ApiException, OSError, urllib3.exceptions.HTTPError) as exc:
            raise ModeStoreError(f"configmap {self._namespace}/{self._name}: {exc}") from None


def now() -> datetime:
    """The reports' clock (UTC)."""
    return datetime.now(UTC)
