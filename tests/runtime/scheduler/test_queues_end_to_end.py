"""Request queues end to end: real emulator, real LocalCluster, the package's platform with two desk queues.

``TEST_QUEUES`` (platform.py): ``default`` and ``desk-a`` of equal weight, ``desk-b`` capped at one slot, ``urgent``.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from runtime.protocol.messages import JobStatus
from runtime.protocol.queues import DEFAULT_QUEUE, URGENT_QUEUE, request_subscription
from runtime.pubsub.admin import subscription_path
from runtime.scheduler.window import NARROW_PLACES_PER_SLOT, WIDE_PLACES_PER_SLOT
from tests.runtime.scheduler import ON_THE_PACKAGE_PLATFORM
from tests.runtime.scheduler.conftest import Platform
from tests.runtime.scheduler.platform import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240), ON_THE_PACKAGE_PLATFORM]

# Not tiny (runtime.scheduler.packing): one job per task, so starts count grants one for one.
JOB_SLEEP_S = 0.15
RESULT_WAIT_S = 120.0


def _ids(prefix: str, count: int) -> list[str]:
    run = uuid.uuid4().hex[:6]  # the platform is shared: ids of their own per test run
    return [f"{prefix}-{run}-{i}" for i in range(count)]


@contextmanager
def _drained(platform: Platform) -> Iterator[None]:
    """Intake stopped while the block publishes: a backlog in the subscriptions, whatever the machine's speed."""
    assert platform.api.http.post("/control/maintenance", json={"mode": "drain"}).status_code == 200
    try:
        wait_for(lambda: platform.service.consumer and platform.service.consumer.wait_drained(0.1), 30, "the drain")
        yield
    finally:
        assert platform.api.http.post("/control/maintenance", json={"mode": "normal"}).status_code == 200


def _all_succeed_once(platform: Platform, job_ids: list[str]) -> None:
    for job_id in job_ids:
        result = platform.results.wait(job_id, timeout_s=RESULT_WAIT_S)
        assert result.status is JobStatus.SUCCEEDED and result.attempt == 1
        assert len(platform.results.of(job_id)) == 1


def _queue_status(platform: Platform, name: str) -> dict[str, Any]:
    (shown,) = [q for q in platform.api.http.get("/status").json()["queues"] if q["name"] == name]
    return dict(shown)


def test_an_urgent_job_overtakes_a_backlog(platform: Platform) -> None:
    backlog = _ids("backlog", 40)
    with _drained(platform):
        for job_id in backlog:
            platform.requests.job(job_id, sleep_s=JOB_SLEEP_S)
    wait_for(lambda: platform.service.registry.count() >= platform.service.consumer.slots, 30, "the backlog running")
    urgent = _ids("urgent", 1)[0]
    platform.requests.job(urgent, sleep_s=0, queue=URGENT_QUEUE)
    assert platform.results.wait(urgent, timeout_s=RESULT_WAIT_S).status is JobStatus.SUCCEEDED
    # It took one of the next places to free: most of the backlog, published before it, is still to run.
    unfinished = sum(not platform.results.of(job_id) for job_id in backlog)
    assert unfinished >= len(backlog) // 2
    status = _queue_status(platform, URGENT_QUEUE)
    assert status["started"] >= 1 and status["max_slots"] is None
    _all_succeed_once(platform, backlog)


def test_two_backlogged_queues_of_equal_weight_share_the_starts(platform: Platform) -> None:
    # desk-a publishes ten times as many; while both have work waiting, each gets about half of the starts.
    desk = _ids("share-desk", 100)
    default = _ids("share-default", 10)
    others = _ids("share-other", 10)  # default's, published after desk-a's, to make the share window wider
    with _drained(platform):
        for job_id in desk:
            platform.requests.job(job_id, sleep_s=JOB_SLEEP_S, queue="desk-a")
        for job_id in default + others:
            platform.requests.job(job_id, sleep_s=JOB_SLEEP_S)
    _all_succeed_once(platform, default + others)
    started = [job_id for job_id in platform.backend.runs if job_id.startswith(("share-desk", "share-default",
                                                                               "share-other"))]
    # The first 20 default jobs are out before desk-a is a third through: without a share, 100 would go first.
    last_default = max(started.index(job_id) for job_id in default + others)
    assert last_default < 2 * len(default + others) + 2 * platform.service.consumer.slots + 4
    _all_succeed_once(platform, desk)
    shares = {q["name"]: q for q in platform.api.http.get("/status").json()["queues"]}
    assert shares["desk-a"]["started"] >= len(desk) and shares["desk-a"]["weight"] == 1


def test_a_capped_queue_never_holds_more_than_its_cap(platform: Platform) -> None:
    capped = _ids("capped", 12)
    free = _ids("uncapped", 12)
    most: Counter[str] = Counter()
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            for name in ("desk-b", "desk-a"):
                most[name] = max(most[name], _queue_status(platform, name)["slots"])
    sampler = threading.Thread(target=sample, daemon=True)
    with _drained(platform):
        for job_id in capped:
            platform.requests.job(job_id, sleep_s=JOB_SLEEP_S, queue="desk-b")
        for job_id in free:
            platform.requests.job(job_id, sleep_s=JOB_SLEEP_S, queue="desk-a")
    sampler.start()
    try:
        _all_succeed_once(platform, capped + free)
    finally:
        stop.set()
        sampler.join(10)
    assert most["desk-b"] == 1  # its cap (TEST_QUEUES), sampled as the bench samples it
    assert most["desk-a"] > 1


def test_the_backlog_stays_in_the_broker(platform: Platform, monkeypatch: pytest.MonkeyPatch) -> None:
    # Thousands of tiny jobs waiting on one queue: the replica holds a stream's window of them, the rest wait in
    # Pub/Sub, where another replica could take them.
    subscription = subscription_path(platform.project, request_subscription("desk-a"))
    broker = platform.emulator.broker
    real = broker.lease_locked
    leased: list[int] = []

    def recording(queue, *args, **kwargs):  # type: ignore[no-untyped-def]
        received = real(queue, *args, **kwargs)
        if received and queue.name == subscription:
            leased.append(queue.stats().outstanding)
        return received
    monkeypatch.setattr(broker, "lease_locked", recording)
    jobs = _ids("deep", 600)  # several times the most a replica's streams may hold (the assertion's bound)
    with _drained(platform):
        for job_id in jobs:
            platform.requests.job(job_id, queue="desk-a")
    waiting = wait_for(lambda: platform.emulator.stats().subscription(subscription).undelivered, 10, "the backlog")
    assert waiting > 400
    _all_succeed_once(platform, jobs)
    slots = platform.service.consumer.slots
    # At most a wide window's places, and a narrow stream's still draining beside it while the window widened.
    assert 0 < max(leased) <= (WIDE_PLACES_PER_SLOT + NARROW_PLACES_PER_SLOT) * slots


def test_a_drain_and_a_resize_lose_nothing_with_several_queues_in_use(platform: Platform) -> None:
    by_queue = {queue: _ids(f"multi-{queue}", 8) for queue in (DEFAULT_QUEUE, "desk-a", "desk-b", URGENT_QUEUE)}
    for queue, job_ids in by_queue.items():
        for job_id in job_ids[:4]:
            platform.requests.job(job_id, sleep_s=JOB_SLEEP_S, queue=queue)
    consumer = platform.service.consumer
    slots = consumer.slots
    wait_for(lambda: platform.service.registry.count() >= 1, 30, "jobs running")
    # A drain in the middle: what each stream holds runs and is acked; what it does not stays in Pub/Sub.
    with _drained(platform):
        for queue, job_ids in by_queue.items():
            for job_id in job_ids[4:]:
                platform.requests.job(job_id, sleep_s=JOB_SLEEP_S, queue=queue)
    # A resize while all four run: every stream is replaced, the shared places follow.
    consumer.resize(slots + 1)
    try:
        assert consumer.fair.capacity > 0 and all(q["places"] > 0 for q in
                                                  platform.api.http.get("/status").json()["queues"])
        _all_succeed_once(platform, [job_id for job_ids in by_queue.values() for job_id in job_ids])
    finally:
        consumer.resize(slots)
    wait_for(lambda: consumer.wait_drained(0.1), 30, "replaced streams to close")
    assert all(q["slots"] == 0 and q["waiting"] == 0 for q in platform.api.http.get("/status").json()["queues"])
