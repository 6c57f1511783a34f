"""The shared maintenance record: on a file for local replicas, on a ConfigMap through the real Kubernetes client."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from runtime.protocol import contract
from runtime.scheduler.maintenance import (
    REPORT_STALE_S,
    ConfigMapModeStore,
    FileModeStore,
    InMemoryModeStore,
    Mode,
    ModeStoreError,
    ReplicaReport,
    SharedMode,
)
from tests.runtime.scheduler.merge_patch import merge_patch
from tests.validation.recorded_kube import RecordedKubeApi

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
PATH = f"/api/v1/namespaces/{contract.RUNTIME_NAMESPACE}/configmaps/{contract.MAINTENANCE_CONFIGMAP}"


def _report(mode: Mode, in_flight: int = 0, at: datetime = NOW) -> ReplicaReport:
    return ReplicaReport(mode, in_flight, at)


def test_replicas_on_one_file_share_the_mode_and_each_others_reports(tmp_path: Path) -> None:
    first, second = FileModeStore(tmp_path / "maintenance.json"), FileModeStore(tmp_path / "maintenance.json")
    assert first.read() == SharedMode()  # nothing written yet: normal
    first.set_mode(Mode.DRAIN)
    first.report("a", _report(Mode.DRAIN, 2))
    second.report("b", _report(Mode.DRAIN))
    shared = second.read()
    assert shared.mode is Mode.DRAIN
    assert shared.replicas == {"a": _report(Mode.DRAIN, 2), "b": _report(Mode.DRAIN)}


def test_a_gone_replicas_report_is_left_out_and_removed(tmp_path: Path) -> None:
    store = FileModeStore(tmp_path / "maintenance.json")
    old = NOW - timedelta(seconds=REPORT_STALE_S + 1)
    store.report("gone", _report(Mode.NORMAL, 1, old))
    store.report("alive", _report(Mode.DRAIN))
    assert list(store.read().fresh(NOW)) == ["alive"]
    assert list(store.read().replicas) == ["alive"]  # removed by the next report


def test_an_unreadable_file_is_a_store_error_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "maintenance.json"
    path.write_text("{not json")
    with pytest.raises(ModeStoreError, match=r"maintenance\.json"):
        FileModeStore(path).read()


def test_the_in_memory_store_of_a_single_replica_keeps_the_same_record() -> None:
    store = InMemoryModeStore()
    store.set_mode(Mode.DRAIN)
    store.report("only", _report(Mode.DRAIN))
    assert store.read() == SharedMode(Mode.DRAIN, {"only": _report(Mode.DRAIN)})


class ConfigMapServer:
    """One ConfigMap as the API server keeps it: GET, and PATCH merging a dict body into it (a strategic merge
    patch of a ConfigMap's ``data`` map merges key by key; null removes a key). Absent until the deploy makes it:
    404, as for any read or patch of an object that does not exist."""

    def __init__(self, exists: bool = True) -> None:
        self.config_map: dict[str, Any] | None = (
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": contract.MAINTENANCE_CONFIGMAP, "namespace": contract.RUNTIME_NAMESPACE}}
            if exists else None)
        self.api = RecordedKubeApi({("GET", PATH): self._get, ("PATCH", PATH): self._patch})

    def _missing(self) -> tuple[int, Any]:
        return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}

    def _get(self, body: Any) -> tuple[int, Any]:
        return (200, copy.deepcopy(self.config_map)) if self.config_map is not None else self._missing()

    def _patch(self, body: Any) -> tuple[int, Any]:
        if self.config_map is None:
            return self._missing()
        if not isinstance(body, dict):  # a JSON patch (a list of operations) is not what the store sends
            return 415, {"kind": "Status", "code": 415, "reason": "UnsupportedMediaType"}
        merge_patch(self.config_map, body)
        return 200, copy.deepcopy(self.config_map)

    def store(self) -> ConfigMapModeStore:
        from kubernetes import client

        return ConfigMapModeStore(client.CoreV1Api(self.api.api_client()), contract.RUNTIME_NAMESPACE)


@pytest.fixture
def server() -> Any:
    made = ConfigMapServer()
    yield made
    made.api.close()


def test_pods_share_the_mode_through_the_configmap_each_patching_only_its_own_keys(server: ConfigMapServer) -> None:
    first, second = server.store(), server.store()
    first.set_mode(Mode.DRAIN)
    first.report("gpu-scheduler-a", _report(Mode.DRAIN, 1))
    second.report("gpu-scheduler-b", _report(Mode.NORMAL))
    shared = second.read()
    assert shared.mode is Mode.DRAIN
    assert set(shared.replicas) == {"gpu-scheduler-a", "gpu-scheduler-b"}
    patches = [r.body for r in server.api.requests if r.method == "PATCH"]
    assert patches[0] == {"data": {"mode": "drain"}}  # never the whole data: a report of another pod survives
    assert all(set(p["data"]) <= {"mode", "replica.gpu-scheduler-a", "replica.gpu-scheduler-b"} for p in patches)


def test_a_gone_pods_report_is_removed_with_a_null_key(server: ConfigMapServer) -> None:
    store = server.store()
    store.report("old-pod", _report(Mode.NORMAL, 0, NOW - timedelta(seconds=REPORT_STALE_S + 1)))
    store.report("new-pod", _report(Mode.DRAIN))
    last = [r.body for r in server.api.requests if r.method == "PATCH"][-1]["data"]
    assert last["replica.old-pod"] is None and json.loads(last["replica.new-pod"])["mode"] == "drain"
    assert list(server.store().read().replicas) == ["new-pod"]


def test_a_missing_configmap_is_a_store_error_naming_it() -> None:
    server = ConfigMapServer(exists=False)
    try:
        with pytest.raises(ModeStoreError, match=contract.MAINTENANCE_CONFIGMAP):
            server.store().read()
        with pytest.raises(ModeStoreError, match=contract.MAINTENANCE_CONFIGMAP):
            server.store().set_mode(Mode.DRAIN)
    finally:
        server.api.close()


class _Consumer:
    """The consumer's intake switch, as the service drives it."""

    def __init__(self) -> None:
        self.running = True
        self.waiting = 0

    def drain(self) -> None:
        self.running = False

    def resume(self) -> None:
        self.running = True


def _service(store: Any) -> Any:
    from runtime.scheduler.service import Service
    from runtime.scheduler.settings import Settings

    service = Service(Settings.from_env({"GPURT_RESULT_STORE": "memory://maintenance",
                                         contract.SchedulerEnv.CONTROL_TOKEN: "t"}))
    service.consumer = _Consumer()
    service._modes = store
    return service


def test_a_replica_following_a_drained_record_stops_intake_and_reports_it() -> None:
    store = InMemoryModeStore()
    store.set_mode(Mode.DRAIN)
    service = _service(store)
    service.follow_maintenance()
    assert service.mode is Mode.DRAIN and not service.consumer.running
    (report,) = store.read().replicas.values()
    assert report.mode is Mode.DRAIN and report.in_flight == 0


def test_a_replica_only_drain_leaves_the_shared_mode_alone() -> None:
    store = InMemoryModeStore()
    service = _service(store)
    service.set_mode(Mode.DRAIN, replica_only=True)
    assert not service.consumer.running and store.read().mode is Mode.NORMAL
    service.follow_maintenance()  # the shared mode is normal: this replica stays drained until it restarts
    assert not service.consumer.running


def test_a_follow_round_that_read_before_a_drain_does_not_undo_it() -> None:
    """The round read `normal`, then an operator drained: the round must not apply its older read afterwards."""
    import threading

    class SlowRead(InMemoryModeStore):
        def __init__(self) -> None:
            super().__init__()
            self.reading, self.release = threading.Event(), threading.Event()

        def read(self) -> SharedMode:
            shared = super().read()
            if threading.current_thread().name == "follow":
                self.reading.set()
                self.release.wait(10)
            return shared

    store = SlowRead()
    service = _service(store)
    follow = threading.Thread(target=service.follow_maintenance, name="follow")
    follow.start()
    assert store.reading.wait(10)
    drain = threading.Thread(target=service.set_mode, args=(Mode.DRAIN,))
    drain.start()
    drain.join(0.5)  # without the lock the drain is done by now; with it, it waits for the round
    store.release.set()
    follow.join(10)
    drain.join(10)
    assert service.mode is Mode.DRAIN and not service.consumer.running
    assert store.read().mode is Mode.DRAIN


def test_a_drain_the_record_cannot_take_is_a_503_not_half_a_drain(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from runtime.scheduler.api import create_app

    blocked = tmp_path / "maintenance.json"
    blocked.mkdir()  # a directory where the file should be: every write fails
    service = _service(FileModeStore(blocked))
    response = TestClient(create_app(service)).post("/control/maintenance", json={"mode": "drain"},
                                                    headers={"Authorization": "Bearer t"})
    assert response.status_code == 503 and "maintenance mode" in response.json()["detail"]
    assert service.mode is Mode.NORMAL and service.consumer.running
