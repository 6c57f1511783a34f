"""Stuck-lock recovery: forced release through the scheduler's LeaseStore seam, then a standby takes over."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runtime.leases.elector import LeaderElector
from runtime.leases.kubernetes import KubernetesLeaseStore
from runtime.leases.records import InMemoryLeaseStore
from runtime.protocol import contract
from tests.validation.recorded_kube import RecordedKubeApi
from validation.leader import LeaderError, force_release, view

LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{contract.RUNTIME_NAMESPACE}/leases/{contract.LEADER_LEASE_NAME}"


class Clock:
    """A hand-wound monotonic clock, so lease expiry is exact and tests never sleep."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_standby_takes_over_a_stuck_lease_at_once_after_forced_release() -> None:
    store, clock = InMemoryLeaseStore(), Clock()
    stuck = LeaderElector(store, "replica-a", clock=clock)
    standby = LeaderElector(store, "replica-b", clock=clock)
    assert stuck.tick() and not standby.tick()
    # replica-a hangs while its renew loop still runs (the lock never expires on its own)
    for _ in range(10):
        clock.now += 5
        stuck.tick()
        assert not standby.tick()

    force_release(store, expected_holder="replica-a")

    assert standby.tick()
    assert store.get().holder == "replica-b" and store.get().transitions == 1


def test_release_refuses_when_the_lease_moved_or_has_no_holder() -> None:
    store = InMemoryLeaseStore()
    with pytest.raises(LeaderError, match="does not exist"):
        force_release(store)
    LeaderElector(store, "replica-b").tick()
    with pytest.raises(LeaderError, match="now held by 'replica-b', not 'replica-a'"):
        force_release(store, expected_holder="replica-a")
    force_release(store)
    with pytest.raises(LeaderError, match="no holder already"):
        force_release(store)


def test_release_through_the_kubernetes_lease_api() -> None:
    recorded = json.loads((Path(__file__).parent / "fixtures" / "kubernetes" / "lease.json").read_text())
    server = RecordedKubeApi({("GET", LEASE): recorded, ("PUT", LEASE): lambda body: (200, body)})
    try:
        from kubernetes import client

        store = KubernetesLeaseStore(client.CoordinationV1Api(server.api_client()), contract.RUNTIME_NAMESPACE)
        lease = view(store.get())
        assert lease.holder == "gpu-scheduler-6c9d8f7b5-2xk4p"
        assert lease.expired(datetime(2026, 11, 21, 19, 40, 19, tzinfo=UTC))
        assert not lease.expired(datetime(2026, 11, 21, 19, 40, 10, tzinfo=UTC))

        force_release(store, expected_holder="gpu-scheduler-6c9d8f7b5-2xk4p")
    finally:
        server.close()

    put = next(r for r in server.requests if r.method == "PUT")
    assert put.body["metadata"]["resourceVersion"] == "48214555"  # compare-and-swap on what was read
    assert put.body["spec"]["holderIdentity"] == ""
    assert put.body["spec"]["leaseDurationSeconds"] == 1
