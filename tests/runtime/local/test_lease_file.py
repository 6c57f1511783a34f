"""The file lease the local replicas elect on: compare-and-swap semantics, election timing, many processes."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runtime.leases.elector import LEASE_DURATION_S, RETRY_PERIOD_S, LeaderElector
from runtime.leases.file import FileLeaseStore
from runtime.leases.records import LeaseConflict, LeaseRecord
from validation.leader import force_release

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _elector(store: FileLeaseStore, identity: str, clock: FakeClock) -> LeaderElector:
    return LeaderElector(store, identity, clock=clock, wall_clock=lambda: NOW)


def test_create_once_then_compare_and_swap_on_the_version(tmp_path: Path) -> None:
    store = FileLeaseStore(tmp_path / "lease.json")
    assert store.get() is None

    first = store.create(LeaseRecord(holder="a", duration_s=15.0, acquired_at=NOW, renewed_at=NOW))
    with pytest.raises(LeaseConflict):
        store.create(LeaseRecord(holder="b", duration_s=15.0))
    second = store.update(replace(first, holder="b", transitions=1))
    with pytest.raises(LeaseConflict):
        store.update(replace(first, holder="c"))  # stale version: b's write must not be lost

    assert store.get() == second
    assert (second.holder, second.transitions, second.acquired_at) == ("b", 1, NOW)
    assert int(second.version or 0) > int(first.version or 0)


def test_a_standby_takes_over_only_after_the_kubernetes_lease_duration(tmp_path: Path) -> None:
    store = FileLeaseStore(tmp_path / "lease.json")
    clock = FakeClock()
    a, b = _elector(store, "a", clock), _elector(store, "b", clock)
    assert a.tick() and not b.tick()

    # a crashes: it stops renewing. b keeps trying every retry period, just like the pods.
    waited = 0.0
    while not b.tick():
        clock.now += RETRY_PERIOD_S
        waited += RETRY_PERIOD_S
        assert waited <= LEASE_DURATION_S + RETRY_PERIOD_S
    assert waited >= LEASE_DURATION_S
    assert store.get().holder == "b" and store.get().transitions == 1


def test_forced_release_hands_a_renewed_lease_over_at_once(tmp_path: Path) -> None:
    store = FileLeaseStore(tmp_path / "lease.json")
    clock = FakeClock()
    a, b = _elector(store, "a", clock), _elector(store, "b", clock)
    a.tick()
    for _ in range(20):  # a renews: the lock holds however long b waits
        clock.now += RETRY_PERIOD_S
        assert a.tick() and not b.tick()

    force_release(store, expected_holder="a", now=NOW)

    assert b.tick() and store.get().holder == "b"


_CONTENDER = """
import sys
from dataclasses import replace
from pathlib import Path
from runtime.leases.records import LeaseConflict
from runtime.leases.file import FileLeaseStore

store, wins = FileLeaseStore(Path(sys.argv[1])), 0
while wins < int(sys.argv[2]):
    current = store.get()
    try:
        store.update(replace(current, transitions=current.transitions + 1, holder=sys.argv[3]))
        wins += 1
    except LeaseConflict:
        pass
"""


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_concurrent_processes_never_lose_an_update(tmp_path: Path) -> None:
    path = tmp_path / "lease.json"
    FileLeaseStore(path).create(LeaseRecord(holder=None, duration_s=15.0))
    processes, writes = 4, 50

    procs = [subprocess.Popen([sys.executable, "-c", _CONTENDER, str(path), str(writes), f"p{i}"])
             for i in range(processes)]
    assert [p.wait(timeout=50) for p in procs] == [0] * processes

    # Every successful compare-and-swap counted once: a lost update would leave the count short.
    final = FileLeaseStore(path).get()
    assert final.transitions == processes * writes
    assert int(final.version or 0) == processes * writes + 1
    assert not list(tmp_path.glob("*.tmp"))
