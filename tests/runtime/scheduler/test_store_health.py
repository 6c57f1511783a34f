"""The store's circuit breaker on its own: opens on a failure, probes, closes, releases waiting jobs."""

from __future__ import annotations

import threading

from runtime.scheduler.store import StoreUnavailable
from runtime.scheduler.store_health import StoreHealth

PROBE_S = 0.01
JOIN_S = 10.0  # a bound for a thread that must end, never a wait for the behaviour itself


class Probe:
    """A probe that fails until ``back`` is set, counting its calls."""

    def __init__(self) -> None:
        self.back = threading.Event()
        self.calls = 0
        self.failed_twice = threading.Event()

    def __call__(self) -> None:
        self.calls += 1
        if not self.back.is_set():
            if self.calls >= 2:
                self.failed_twice.set()
            raise StoreUnavailable("still read-only")


class Changes:
    """Records ``available`` each time the breaker says it changed."""

    def __init__(self) -> None:
        self.health: StoreHealth | None = None
        self.seen: list[bool] = []
        self.cond = threading.Condition()

    def __call__(self) -> None:
        assert self.health is not None
        with self.cond:
            self.seen.append(self.health.available)
            self.cond.notify_all()

    def wait(self, count: int) -> list[bool]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.seen) >= count, JOIN_S)
            return list(self.seen)


def _breaker() -> tuple[StoreHealth, Probe, Changes]:
    probe, changes = Probe(), Changes()
    health = StoreHealth(probe, changes, probe_period_s=PROBE_S)
    changes.health = health
    return health, probe, changes


def test_a_failure_opens_the_breaker_and_a_successful_probe_closes_it() -> None:
    health, probe, changes = _breaker()
    assert health.available and health.reason is None
    health.trip(StoreUnavailable("cannot write results/a.json: read-only"))
    assert not health.available and "read-only" in (health.reason or "")
    assert health.unavailable_since is not None
    assert changes.wait(1) == [False]
    assert probe.failed_twice.wait(JOIN_S)  # keeps probing while the store fails
    assert not health.available and health.reason == "still read-only"
    probe.back.set()
    assert changes.wait(2) == [False, True]
    assert health.available and health.unavailable_since is None


def test_more_failures_while_open_change_nothing_and_start_no_second_probe() -> None:
    health, probe, changes = _breaker()
    for _ in range(5):
        health.trip(StoreUnavailable("down"))
    assert [t.name for t in threading.enumerate()].count("gpurt-store-probe") == 1
    probe.back.set()
    assert changes.wait(2) == [False, True]  # one opening, one closing: intake is stopped and resumed once


def test_waiting_jobs_are_released_when_the_store_is_back() -> None:
    health, probe, _ = _breaker()
    released: list[str] = []

    def job(name: str) -> None:
        health.wait_out(StoreUnavailable(f"{name} cannot store its result"))
        released.append(name)

    jobs = [threading.Thread(target=job, args=(f"job-{i}",)) for i in range(3)]
    for thread in jobs:
        thread.start()
    assert probe.failed_twice.wait(JOIN_S)
    assert released == []  # all three still wait, their messages unsettled
    probe.back.set()
    for thread in jobs:
        thread.join(JOIN_S)
    assert sorted(released) == ["job-0", "job-1", "job-2"]


def test_close_gives_waiting_jobs_their_error_back() -> None:
    health, probe, _ = _breaker()
    outcome: list[BaseException] = []

    def job() -> None:
        try:
            health.wait_out(StoreUnavailable("down at shutdown"))
        except StoreUnavailable as exc:
            outcome.append(exc)

    thread = threading.Thread(target=job)
    thread.start()
    assert probe.failed_twice.wait(JOIN_S)
    health.close()
    thread.join(JOIN_S)
    assert [str(e) for e in outcome] == ["down at shutdown"]
