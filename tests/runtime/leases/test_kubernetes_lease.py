"""KubernetesLeaseStore against a recording stand-in of CoordinationV1Api with resourceVersion semantics."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from runtime.leases.elector import LeaderElector
from runtime.leases.kubernetes import KubernetesLeaseStore
from runtime.leases.records import LeaseConflict, LeaseRecord
from runtime.protocol import contract


class RecordingCoordinationApi:
    """One namespace of Leases, with optimistic concurrency like the API server."""

    def __init__(self) -> None:
        self.leases: dict[str, client.V1Lease] = {}
        self.version = 100
        self.calls: list[tuple[str, str]] = []

    def read_namespaced_lease(self, name: str, namespace: str) -> client.V1Lease:
        self.calls.append(("read", name))
        if name not in self.leases:
            raise ApiException(status=404, reason="Not Found")
        return copy.deepcopy(self.leases[name])

    def create_namespaced_lease(self, namespace: str, body: client.V1Lease) -> client.V1Lease:
        self.calls.append(("create", body.metadata.name))
        if body.metadata.name in self.leases:
            raise ApiException(status=409, reason="AlreadyExists")
        return self._store(body)

    def replace_namespaced_lease(self, name: str, namespace: str, body: client.V1Lease) -> client.V1Lease:
        self.calls.append(("replace", name))
        if self.leases[name].metadata.resource_version != body.metadata.resource_version:
            raise ApiException(status=409, reason="Conflict")
        return self._store(body)

    def _store(self, body: client.V1Lease) -> client.V1Lease:
        self.version += 1
        stored = copy.deepcopy(body)
        stored.metadata.resource_version = str(self.version)
        self.leases[stored.metadata.name] = stored
        return copy.deepcopy(stored)


def test_round_trip_through_the_lease_object() -> None:
    api = RecordingCoordinationApi()
    store = KubernetesLeaseStore(api, contract.RUNTIME_NAMESPACE)
    assert store.get() is None
    now = datetime(2026, 1, 1, tzinfo=UTC)
    created = store.create(LeaseRecord(holder="pod-a", duration_s=15, acquired_at=now, renewed_at=now))
    read = store.get()
    assert read == created and read.holder == "pod-a" and read.version == "101"
    lease = api.leases[contract.LEADER_LEASE_NAME]
    assert lease.spec.lease_duration_seconds == 15 and lease.metadata.labels == contract.SCHEDULER_LABELS


def test_stale_writes_conflict() -> None:
    store = KubernetesLeaseStore(RecordingCoordinationApi(), contract.RUNTIME_NAMESPACE)
    first = store.create(LeaseRecord(holder="a", duration_s=15))
    store.update(first)
    with pytest.raises(LeaseConflict):
        store.update(first)  # its resourceVersion is old now
    with pytest.raises(LeaseConflict):
        store.create(first)


def test_two_electors_on_one_lease_never_both_lead() -> None:
    api = RecordingCoordinationApi()
    clock = [0.0]
    electors = [LeaderElector(KubernetesLeaseStore(api, "ns"), name, clock=lambda: clock[0]) for name in ("a", "b")]
    for _ in range(5):
        for elector in electors:
            elector.tick()
        assert sum(e.is_leader for e in electors) == 1
        clock[0] += 2.0
