"""Leader election with an in-memory lease and a fake clock: takeover after expiry, no split brain, release."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runtime.leases.elector import LEASE_DURATION_S, RENEW_DEADLINE_S, LeaderElector
from runtime.leases.records import InMemoryLeaseStore


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _candidates(store: InMemoryLeaseStore, clock: FakeClock, *names: str) -> list[LeaderElector]:
    return [LeaderElector(store, name, clock=clock, wall_clock=lambda: datetime.now(UTC)) for name in names]


def test_first_candidate_leads_and_the_other_waits() -> None:
    store, clock = InMemoryLeaseStore(), FakeClock()
    a, b = _candidates(store, clock, "a", "b")
    assert a.tick() is True
    assert b.tick() is False
    assert b.holder == "a"
    clock.now += LEASE_DURATION_S / 2
    assert a.tick() is True and b.tick() is False


def test_standby_takes_over_only_after_the_lease_expires() -> None:
    store, clock = InMemoryLeaseStore(), FakeClock()
    a, b = _candidates(store, clock, "a", "b")
    a.tick()
    b.tick()  # b sees a's record now
    clock.now += LEASE_DURATION_S - 0.1
    assert b.tick() is False
    clock.now += 0.2
    assert b.tick() is True
    assert store.get().holder == "b" and store.get().transitions == 1


def test_no_split_brain_a_stale_leader_steps_down() -> None:
    store, clock = InMemoryLeaseStore(), FakeClock()
    a, b = _candidates(store, clock, "a", "b")
    a.tick()
    b.tick()
    clock.now += LEASE_DURATION_S + 1  # a was paused (GC, partition) past its lease
    assert b.tick() is True
    assert a.tick() is False  # its renew finds b's record: it must not lead
    assert [c.is_leader for c in (a, b)] == [False, True]


def test_leader_keeps_leading_through_api_errors_until_the_renew_deadline() -> None:
    store, clock = InMemoryLeaseStore(), FakeClock()
    failures: list[Exception] = []
    a = LeaderElector(store, "a", clock=clock, on_error=failures.append)
    a.tick()
    broken = RuntimeError("API server unreachable")
    store.get = lambda: (_ for _ in ()).throw(broken)  # type: ignore[method-assign]
    clock.now += RENEW_DEADLINE_S - 1
    assert a.tick() is True
    clock.now += 2
    assert a.tick() is False
    assert failures == [broken, broken]


def test_release_on_stop_hands_over_at_once() -> None:
    store, clock = InMemoryLeaseStore(), FakeClock()
    a, b = _candidates(store, clock, "a", "b")
    changes: list[bool] = []
    a._on_change = changes.append
    a.tick()
    b.tick()
    a.release()
    assert changes == [True, False]
    assert b.tick() is True  # no waiting for expiry


def test_renew_deadline_must_be_shorter_than_the_lease() -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        LeaderElector(InMemoryLeaseStore(), "a", lease_duration_s=5, renew_deadline_s=5)
