"""The scheduler end to end: real emulator, real LocalCluster, real HTTP on loopback."""

from __future__ import annotations

import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from kernels.sizes import PACK_MAX_SLEEP_S
from runtime.protocol import contract
from runtime.protocol.messages import ErrorKind, JobRequest, JobStatus
from runtime.protocol.queues import DEFAULT_QUEUE, URGENT_QUEUE
from runtime.pubsub.admin import subscription_path
from runtime.scheduler import window
from runtime.scheduler.intake import stream_slots
from runtime.scheduler.window import NARROW_PLACES_PER_SLOT, WIDE_PLACES_PER_SLOT, WIDEN_AFTER_TINY
from tests.runtime.scheduler import ON_THE_PACKAGE_PLATFORM
from tests.runtime.scheduler.conftest import Platform
from tests.runtime.scheduler.platform import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), ON_THE_PACKAGE_PLATFORM]


@pytest.fixture(autouse=True)
def narrow_window(platform: Platform) -> None:
    """Each test starts on one narrow stream per queue: the platform is shared, and a test before may have left a
    run of tiny jobs behind (docs/scheduler.md, "Wide window for tiny jobs"), which a job that is not tiny
    narrows, or a replaced stream still closing, whose last acks would land in this test."""
    consumer = platform.service.consumer
    for queue in consumer.queues:
        narrow = NARROW_PLACES_PER_SLOT * stream_slots(queue, consumer.slots)
        if _places(platform, queue.name) != narrow:
            job_id = f"narrow-window-{queue.name}-{uuid.uuid4().hex[:8]}"
            platform.requests.job(job_id, sleep_s=2 * PACK_MAX_SLEEP_S, queue=queue.name)
            platform.results.wait(job_id)
            wait_for(lambda q=queue.name, n=narrow: _places(platform, q) == n, 10, "a narrow window")
    wait_for(lambda: consumer.wait_drained(0.1), 30, "replaced streams to close")


def _places(platform: Platform, queue: str = DEFAULT_QUEUE) -> int:
    """The messages ``queue``'s stream may hold now, as ``GET /status`` shows them."""
    (shown,) = [q for q in platform.api.http.get("/status").json()["queues"] if q["name"] == queue]
    return int(shown["places"])


def test_probe_round_trip_within_the_contract_timeout(platform: Platform) -> None:
    platform.requests.raw(contract.PROBE_MESSAGE)
    result = platform.results.wait(contract.PROBE_MESSAGE["job_id"], timeout_s=contract.PROBE_TIMEOUT_S)
    assert result.status is JobStatus.SUCCEEDED
    assert platform.service.store.get(result.job_id) == result


def test_the_probe_is_answered_past_a_request_backlog(platform: Platform) -> None:
    """issue #42: with every slot busy and requests waiting behind them (load, not breakage), the deploy probe,
    published as validation publishes it, comes back through the probe subscription's own stream and slot."""
    release = threading.Event()
    consumer = platform.service.consumer
    default = consumer.consumer(DEFAULT_QUEUE)
    backlog = [f"backlog-{i}" for i in range(default.places + default.slots)]  # more than the stream holds
    platform.backend.held.update({job_id: release for job_id in backlog})
    try:
        for job_id in backlog:  # not tiny, so they leave the stream's window narrow for the tests after this one
            platform.requests.job(job_id, sleep_s=2 * PACK_MAX_SLEEP_S)
        wait_for(lambda: sum(bool(platform.backend.runs[j]) for j in backlog) >= consumer.slots,
                 30, "every slot to hold a backlog job")
        probe = {**contract.PROBE_MESSAGE, "job_id": "deploy-probe-past-backlog"}
        # As validation publishes it (validation/checks/probe.py): on the urgent queue, with the probe attribute.
        platform.requests.raw(probe, queue=URGENT_QUEUE, job_id=probe["job_id"], type=probe["type"],
                              **{contract.PROBE_ATTRIBUTE: "true"})
        result = platform.results.wait(probe["job_id"], timeout_s=contract.PROBE_TIMEOUT_S)
        assert result.status is JobStatus.SUCCEEDED
        assert all(platform.service.store.get(j) is None for j in backlog)  # the backlog is still waiting
    finally:
        release.set()
        for job_id in backlog:
            platform.results.wait(job_id, timeout_s=60)
        for job_id in backlog:
            platform.backend.held.pop(job_id, None)


def test_health_is_open_and_control_needs_the_token(platform: Platform) -> None:
    assert platform.api.anonymous.get(contract.HEALTH_PATH).json() == contract.HEALTH_BODY
    refused = platform.api.anonymous.post("/control/maintenance", json={"mode": "drain"})
    assert refused.status_code == 401
    wrong = platform.api.anonymous.post("/pools/local/stop", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert platform.service.mode.value == "normal"
    assert platform.api.http.get(contract.READY_PATH).status_code == 200


def test_invalid_message_is_rejected_and_the_consumer_lives_on(platform: Platform) -> None:
    # A body without a usable job id is answered under its message id, never under its attribute.
    message_id = platform.requests.raw(b"{not json", job_id="broken-1")
    platform.requests.raw({"job_id": "bad-type", "type": "quantum_annealing"})
    platform.requests.raw({"job_id": "too-big", "type": "random_walk", "params": {"paths": 10**12}})
    for job_id in (f"invalid-{message_id}", "bad-type", "too-big"):
        result = platform.results.wait(job_id)
        assert result.status is JobStatus.REJECTED
        assert result.error is not None and result.error.kind is ErrorKind.INVALID
    platform.requests.job("after-invalid")
    assert platform.results.wait("after-invalid").status is JobStatus.SUCCEEDED
    assert platform.results.of("broken-1") == []


@pytest.mark.parametrize("job_type, params, key", [
    ("random_walk", {"paths": 2000, "steps": 8}, "paths"),
    ("european_option", {"paths": 4000}, "estimate"),
    ("asian_option", {"paths": 2000, "steps": 4}, "estimate"),
    ("portfolio_var", {"exposures": [1e6, 5e5], "volatilities": [0.2, 0.3], "paths": 4000}, "var"),
])
@pytest.mark.timeout(300)
def test_each_job_type_end_to_end(platform: Platform, job_type: str, params: dict, key: str) -> None:
    job_id = f"e2e-{job_type}"
    platform.requests.job(job_id, job_type, **params)
    # The test platforms run no warm-up (tests/conftest.py): a job compiles its own kernel, which on a fresh
    # checkout (no numba cache) of a loaded 2-core machine can take a minute.
    result = platform.results.wait(job_id, timeout_s=240)
    assert result.status is JobStatus.SUCCEEDED, result.error
    assert result.result is not None and any(key in name for name in result.result)
    assert result.metrics.run_s is not None and result.metrics.queue_wait_s is not None
    for url in result.artifacts.values():
        assert platform.service.store.get_artifact(job_id, url.rsplit("/", 1)[-1])


def test_transient_failure_is_retried_then_succeeds(platform: Platform) -> None:
    platform.backend.fail_attempts["flaky-1"] = {1}
    platform.requests.job("flaky-1")
    result = platform.results.wait("flaky-1")
    assert result.status is JobStatus.SUCCEEDED
    assert result.attempt == 2
    assert platform.backend.runs["flaky-1"] == [1, 2]
    assert len(platform.results.of("flaky-1")) == 1


def test_permanent_failure_is_failed_at_once(platform: Platform) -> None:
    platform.requests.job("perm-1", fail="permanent")
    result = platform.results.wait("perm-1")
    assert result.status is JobStatus.FAILED
    assert result.error is not None and result.error.kind is ErrorKind.PERMANENT
    assert platform.backend.runs["perm-1"] == [1]


def test_duplicate_delivery_is_answered_from_the_store(platform: Platform) -> None:
    platform.requests.job("dup-1", sleep_s=0.1)
    first = platform.results.wait("dup-1")
    platform.requests.job("dup-1", sleep_s=0.1)
    platform.requests.job("dup-marker")  # published after the duplicate: once it is done, so is the duplicate
    platform.results.wait("dup-marker")
    assert platform.backend.runs["dup-1"] == [1]
    # the second request is answered with the stored result, naming the message it answers (same body, same digest)
    original, answer = platform.results.of("dup-1")
    assert original == first and answer.request_digest == first.request_digest
    assert answer.request_message_id != first.request_message_id
    assert answer.model_copy(update={"request_message_id": first.request_message_id}) == first


def test_cancel_stops_a_running_job(platform: Platform) -> None:
    platform.requests.job("cancel-1", sleep_s=60)
    wait_for(lambda: platform.api.http.get("/jobs/cancel-1").json().get("state") == "running", 30, "cancel-1 running")
    assert platform.api.anonymous.delete("/jobs/cancel-1").status_code == 401
    response = platform.api.http.delete("/jobs/cancel-1")
    assert response.status_code == 202 and response.json()["running_here"] is True
    result = platform.results.wait("cancel-1", timeout_s=15)
    assert result.status is JobStatus.CANCELLED
    # The job leaves the replica's registry once its result is published and marked so: the API may say
    # "running" for that moment after the result is out (a loaded CI run saw it), never after.
    wait_for(lambda: platform.api.http.get("/jobs/cancel-1").json()["state"] == "cancelled", 15, "cancel-1 cancelled")
    assert platform.api.http.delete("/jobs/cancel-1").status_code == 409


def test_a_job_cancelled_before_it_runs_never_runs(platform: Platform) -> None:
    # What a replica sees when the DELETE landed on another one: only the marker in the shared store.
    response = platform.api.http.delete("/jobs/cancel-early")
    assert response.status_code == 202 and response.json()["running_here"] is False
    platform.requests.job("cancel-early")
    assert platform.results.wait("cancel-early").status is JobStatus.CANCELLED
    assert "cancel-early" not in platform.backend.runs
    assert platform.api.http.get("/jobs/not a job id").status_code == 422


def _undelivered(platform: Platform, subscription: str) -> int:
    return platform.emulator.stats().subscription(subscription_path(platform.project, subscription)).undelivered


@pytest.mark.slow
def test_transient_forever_fails_at_the_last_attempt_and_dead_letters(platform: Platform) -> None:
    platform.requests.job("forever-1", fail="transient")
    result = platform.results.wait("forever-1", timeout_s=60)
    assert result.status is JobStatus.FAILED
    assert result.error is not None and result.error.kind is ErrorKind.TRANSIENT
    assert result.attempt == contract.MAX_DELIVERY_ATTEMPTS
    assert platform.backend.runs["forever-1"] == list(range(1, contract.MAX_DELIVERY_ATTEMPTS + 1))
    # Nothing lost: the message now waits in the dead-letter queue for `gpurt dlq replay`.
    wait_for(lambda: _undelivered(platform, contract.REQUEST_DLQ_SUBSCRIPTION) >= 1, 30, "the dead letter")
    assert len(platform.results.of("forever-1")) == 1


def _count_nacks(platform: Platform, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every ModifyAckDeadline(0) - a nack - the emulator receives on the request subscription."""
    broker = platform.emulator.broker
    real = broker.modify_ack_deadline
    nacked: list[str] = []

    def recording(subscription: str, ack_ids, deadline_s: int) -> None:  # type: ignore[no-untyped-def]
        ack_ids = list(ack_ids)
        if deadline_s == 0 and subscription.endswith(f"/{contract.REQUEST_SUBSCRIPTION}"):
            nacked.extend(ack_ids)
        real(subscription, ack_ids, deadline_s)

    monkeypatch.setattr(broker, "modify_ack_deadline", recording)
    return nacked


@pytest.mark.slow
def test_drain_nacks_nothing_finishes_in_flight_and_normal_resumes(platform: Platform,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # Both slots busy, every other place of the stream holding a request (prefetched, waiting for a slot)
    # and one request the stream has not sent: a drain runs the held ones (nacking them would burn an
    # attempt) and leaves the other in the subscription. The emulator counts nacks; any would also show as
    # delivery attempt 2.
    nacked = _count_nacks(platform, monkeypatch)
    slots = platform.service.consumer.slots
    running = [f"drain-a{i}" for i in range(slots)]
    held = [f"drain-b{i}" for i in range((NARROW_PLACES_PER_SLOT - 1) * slots)]
    for job_id in running:
        platform.requests.job(job_id, sleep_s=2)
    wait_for(lambda: platform.service.registry.count() == slots, 30, "every slot busy")
    for job_id in held:
        platform.requests.job(job_id)
    wait_for(lambda: _outstanding(platform) == NARROW_PLACES_PER_SLOT * slots, 10, "every place of the stream taken")
    assert platform.api.http.post("/control/maintenance", json={"mode": "drain"}).status_code == 200
    platform.requests.job("drain-c")
    for job_id in running + held:
        finished = platform.results.wait(job_id)
        assert finished.status is JobStatus.SUCCEEDED and finished.attempt == 1
    wait_for(lambda: platform.service.consumer and platform.service.consumer.wait_drained(0.1), 30, "the drain")
    assert platform.results.of("drain-c") == []
    assert _undelivered(platform, contract.REQUEST_SUBSCRIPTION) == 1
    assert _outstanding(platform) == 0  # nothing stranded in a lease
    assert nacked == []
    assert platform.api.http.get(contract.READY_PATH).status_code == 200  # drained on purpose is still ready
    assert platform.api.http.post("/control/maintenance", json={"mode": "normal"}).status_code == 200
    resumed = platform.results.wait("drain-c")
    assert resumed.status is JobStatus.SUCCEEDED and resumed.attempt == 1


def _outstanding(platform: Platform) -> int:
    # By full name: other modules' platforms share this emulator under projects of their own.
    return platform.emulator.stats().subscription(
        subscription_path(platform.project, contract.REQUEST_SUBSCRIPTION)).outstanding


@pytest.mark.slow
def test_the_stream_holds_its_places_per_slot_and_never_more(platform: Platform,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    leased = _record_leased(platform, monkeypatch)
    slots = platform.service.consumer.slots
    jobs = [f"prefetch-{i}" for i in range(4 * slots)]
    for job_id in jobs:
        platform.requests.job(job_id, sleep_s=0.3)
    for job_id in jobs:
        result = platform.results.wait(job_id)
        assert result.status is JobStatus.SUCCEEDED and result.attempt == 1
    # Per slot one running, and two waiting or concluding (consumer.NARROW_PLACES_PER_SLOT), never more.
    assert max(leased) == NARROW_PLACES_PER_SLOT * slots


def _record_leased(platform: Platform, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every lease the emulator grants on the request subscription, as the count it leaves leased, recorded
    under the broker's lock: the true maximum, not a sample."""
    broker = platform.emulator.broker
    real = broker.lease_locked
    leased: list[int] = []

    def recording(queue, *args, **kwargs):  # type: ignore[no-untyped-def]
        received = real(queue, *args, **kwargs)
        if received and queue.name.endswith(f"/{contract.REQUEST_SUBSCRIPTION}"):
            leased.append(queue.stats().outstanding)
        return received

    monkeypatch.setattr(broker, "lease_locked", recording)
    return leased


@pytest.mark.slow
def test_a_backlog_of_tiny_jobs_widens_the_window_and_a_large_job_narrows_it(platform: Platform,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(window, "WIDEN_COOLDOWN_S", 0.0)  # a test before may have narrowed it just now
    nacked = _count_nacks(platform, monkeypatch)
    leased = _record_leased(platform, monkeypatch)
    slots = platform.service.consumer.slots
    jobs = [f"wide-{i}" for i in range(WIDEN_AFTER_TINY + 2 * WIDE_PLACES_PER_SLOT * slots)]
    # A backlog, whatever the machine's speed: the burst is all in the subscription before intake resumes.
    assert platform.api.http.post("/control/maintenance", json={"mode": "drain"}).status_code == 200
    try:
        wait_for(lambda: platform.service.consumer.wait_drained(0.1), 30, "the drain")
        for job_id in jobs:
            platform.requests.job(job_id)
    finally:
        assert platform.api.http.post("/control/maintenance", json={"mode": "normal"}).status_code == 200
    for job_id in jobs:
        result = platform.results.wait(job_id)
        assert result.status is JobStatus.SUCCEEDED and result.attempt == 1
    # Past the run of tiny jobs the replica held more than the narrow window's places; never more than the wide
    # window's and, while the narrow stream drained beside it, that stream's.
    assert NARROW_PLACES_PER_SLOT * slots < max(leased) <= (NARROW_PLACES_PER_SLOT + WIDE_PLACES_PER_SLOT) * slots
    assert _places(platform) == WIDE_PLACES_PER_SLOT * slots
    platform.requests.job("wide-large", sleep_s=2 * PACK_MAX_SLEEP_S)
    assert platform.results.wait("wide-large").status is JobStatus.SUCCEEDED
    assert _places(platform) == NARROW_PLACES_PER_SLOT * slots
    assert nacked == []  # replacing the stream, twice, gave nothing back


# Longest the emulator holds back its answer to the gated ack (seconds): the test releases it sooner, once it has
# seen what it looks for.
ACK_GATE_S = 30.0


def _gate_ack_of(job_id: str, platform: Platform, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Hold back the emulator's answer to the Acknowledge that acks ``job_id``'s request until the returned
    event is set; every other ack is answered at once. The server has freed the acked message's place and
    sends the next message at once; the client frees its own place only on the answer, so until then it
    holds that next message back."""
    broker = platform.emulator.broker
    real_lease, real_ack = broker.lease_locked, broker.acknowledge
    requests = subscription_path(platform.project, contract.REQUEST_SUBSCRIPTION)
    gated: set[str] = set()  # the ack ids of the job's deliveries
    release = threading.Event()

    def lease(queue, *args, **kwargs):  # type: ignore[no-untyped-def]
        received = real_lease(queue, *args, **kwargs)
        if queue.name == requests:
            gated.update(r.ack_id for r in received if json.loads(r.message.data).get("job_id") == job_id)
        return received

    def acknowledge(subscription: str, ack_ids) -> None:  # type: ignore[no-untyped-def]
        ack_ids = list(ack_ids)
        real_ack(subscription, ack_ids)
        if subscription == requests and gated.intersection(ack_ids):
            release.wait(ACK_GATE_S)

    monkeypatch.setattr(broker, "lease_locked", lease)
    monkeypatch.setattr(broker, "acknowledge", acknowledge)
    return release


@pytest.mark.slow
def test_a_drain_runs_a_message_the_client_held_back_instead_of_nacking_it(platform: Platform,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    nacked = _count_nacks(platform, monkeypatch)
    release_acks = _gate_ack_of("held-a", platform, monkeypatch)
    slots = platform.service.consumer.slots
    # Every place of the client taken: held-a and the other slots' jobs run, the rest wait for a slot.
    platform.requests.job("held-a", sleep_s=2)
    others = [f"held-b{i}" for i in range(NARROW_PLACES_PER_SLOT * slots - 1)]
    for job_id in others:
        platform.requests.job(job_id, sleep_s=6)
    try:
        wait_for(lambda: _outstanding(platform) == NARROW_PLACES_PER_SLOT * slots,
                 30, "every place of the client taken")
        platform.requests.job("held-c")
        platform.results.wait("held-a")
        # held-a's ack reached the server, which leased held-c to the client at once; the client, whose places
        # are all taken until the ack's answer comes, holds it back.
        wait_for(lambda: _outstanding(platform) == NARROW_PLACES_PER_SLOT * slots
                 and _undelivered(platform, contract.REQUEST_SUBSCRIPTION) == 0, 5, "held-c sent to the client")
        assert platform.service.registry.get("held-c") is None
        # The drain begins while the client holds held-c back; the ack's answer comes after. (The drain request
        # waits for intake to stop, which needs that answer: it is made on a thread of its own.)
        with ThreadPoolExecutor(1) as requests:
            drain = requests.submit(platform.api.http.post, "/control/maintenance", json={"mode": "drain"})
            wait_for(lambda: platform.service.consumer.draining, 10, "the drain to begin")
            release_acks.set()
            assert drain.result(timeout=30).status_code == 200
        wait_for(lambda: platform.service.consumer and platform.service.consumer.wait_drained(0.1), 30, "the drain")
        assert nacked == []
        for job_id in [*others, "held-c"]:
            result = platform.results.wait(job_id)
            assert result.status is JobStatus.SUCCEEDED and result.attempt == 1
    finally:
        release_acks.set()
        platform.api.http.post("/control/maintenance", json={"mode": "normal"})


@pytest.mark.slow
def test_a_dask_worker_killed_mid_job_does_not_lose_the_job(platform: Platform) -> None:
    import os
    import signal

    client = platform.backend._inner._client  # the real DaskBackend's client
    platform.requests.job("kill-1", sleep_s=3)
    busy = wait_for(lambda: [addr for addr, keys in client.processing().items() if keys], 30, "kill-1 on a worker")
    pid = client.run(os.getpid, workers=busy[:1])[busy[0]]
    os.kill(pid, signal.SIGKILL)
    result = platform.results.wait("kill-1", timeout_s=60)
    assert result.status is JobStatus.SUCCEEDED
    assert platform.backend.runs["kill-1"] == [1]  # Dask rescheduled it; no redelivery was needed


@pytest.mark.slow
def test_a_noop_longer_than_its_timeout_is_rejected_on_its_first_delivery_not_retried(platform: Platform) -> None:
    # issue #35: such a job timed out on each of its five deliveries and was dead-lettered; it cannot succeed
    # on any, so it is refused at once (the timeouts of jobs that may finish on a retry stay transient)
    body = b'{"job_id": "timeout-1", "type": "noop", "params": {"sleep_s": 60}, "timeout_s": 3}'
    platform.requests.raw(body, job_id="timeout-1", type="noop")
    result = platform.results.wait("timeout-1")
    assert result.status is JobStatus.REJECTED and result.attempt == 1
    assert "would time out on every delivery" in result.error.message
    assert platform.backend.runs["timeout-1"] == []


@pytest.mark.slow
def test_a_slot_starts_its_next_job_while_the_last_result_is_still_being_published(
        platform: Platform, monkeypatch: pytest.MonkeyPatch) -> None:
    # The broker holds every Publish of a first job's result until released: a slot that stored, published
    # and acked before taking its next message would start no second job meanwhile.
    broker = platform.emulator.broker
    real = broker.publish
    release = threading.Event()
    slots = platform.service.consumer.slots
    first = [f"overlap-a{i}" for i in range(slots)]
    then = [f"overlap-b{i}" for i in range(slots)]

    def held(request):  # type: ignore[no-untyped-def]
        if request.topic.endswith(f"/{contract.RESULT_TOPIC}") and any(
                message.attributes.get("job_id") in first for message in request.messages):
            release.wait(30)
        return real(request)

    monkeypatch.setattr(broker, "publish", held)
    try:
        for job_id in first:
            platform.requests.job(job_id, sleep_s=0.2)
        for job_id in then:
            platform.requests.job(job_id, sleep_s=0.2)
        wait_for(lambda: all(platform.backend.runs[job_id] for job_id in then), 30,
                 "every second job started while the first results' Publish is held")
        assert all(platform.results.of(job_id) == [] for job_id in first)
    finally:
        release.set()
    for job_id in first + then:
        result = platform.results.wait(job_id)
        assert result.status is JobStatus.SUCCEEDED and result.attempt == 1


@pytest.mark.slow
def test_tiny_jobs_waiting_together_run_packed_and_each_keeps_its_own_outcome(platform: Platform) -> None:
    _occupy_every_worker(platform, "pack-busy", sleep_s=1.5)
    # Waiting behind them: tiny jobs, one failing for good, one failing once (scripted, at its first attempt).
    platform.backend.fail_attempts["pack-again"] = {1}
    tiny = ["pack-1", "pack-again", "pack-2", "pack-3"]
    platform.requests.job("pack-1")
    platform.requests.job("pack-bad", fail="permanent")
    for job_id in tiny[1:]:
        platform.requests.job(job_id, sleep_s=0.01)
    for job_id in ["pack-1", "pack-2", "pack-3"]:
        result = platform.results.wait(job_id)
        assert result.status is JobStatus.SUCCEEDED and result.attempt == 1
    bad = platform.results.wait("pack-bad")
    assert bad.status is JobStatus.FAILED and bad.error is not None and bad.error.kind is ErrorKind.PERMANENT
    again = platform.results.wait("pack-again")
    assert again.status is JobStatus.SUCCEEDED and again.attempt == 2  # nacked alone, redelivered
    assert platform.backend.runs["pack-again"] == [1, 2]
    packed = [pack for pack in platform.backend.packs if set(pack) & {*tiny, "pack-bad"}]
    assert any(len(pack) > 1 for pack in packed), packed
    for job_id in [*tiny, "pack-bad"]:
        assert len(platform.results.of(job_id)) == 1  # one result each, none duplicated


@pytest.mark.slow
def test_a_job_submitted_ahead_waits_on_a_worker_and_its_timeout_and_queue_wait_count_from_its_start(
        platform: Platform) -> None:
    blockers = _occupy_every_worker(platform, "ahead-a", sleep_s=2.5)
    # Submitted while every slot's job runs, it starts on a worker when one of them ends. Its 1.5 s timeout
    # would be over before it starts if it counted from the submit.
    request = JobRequest.model_validate({"job_id": "ahead-b", "type": "noop", "params": {"sleep_s": 0.05},
                                         "timeout_s": 1.5})
    published = datetime.now(UTC)
    platform.requests.raw(request.model_dump_json().encode(), job_id="ahead-b", type="noop")
    wait_for(lambda: platform.backend.runs["ahead-b"] == [1], 10, "ahead-b handed to the workers")
    assert all(platform.results.of(job_id) == [] for job_id in blockers)  # before any slot's job ended
    result = platform.results.wait("ahead-b")
    assert result.status is JobStatus.SUCCEEDED and result.attempt == 1
    # Queue wait is publish -> start on the worker, so it covers the wait behind a blocker there (a blocker's
    # result is stamped a little after it ended: the margin).
    first_end = min(platform.results.wait(job_id).finished_at for job_id in blockers)
    assert result.metrics.queue_wait_s is not None
    assert result.metrics.queue_wait_s >= (first_end - published).total_seconds() - 0.5 > 0.5


@pytest.mark.slow
def test_a_job_submitted_ahead_is_cancelled_before_its_turn_and_the_slot_goes_on(platform: Platform) -> None:
    blockers = _occupy_every_worker(platform, "ahead-cancel-a", sleep_s=1.5)
    platform.requests.job("ahead-cancel-b", sleep_s=30)
    wait_for(lambda: platform.backend.runs["ahead-cancel-b"] == [1], 10, "the job handed to the workers ahead")
    assert platform.api.http.delete("/jobs/ahead-cancel-b").status_code == 202  # queued on a worker, not started
    cancelled = platform.results.wait("ahead-cancel-b")
    assert cancelled.status is JobStatus.CANCELLED and cancelled.attempt == 1
    for job_id in blockers:  # the jobs ahead of it were not disturbed
        assert platform.results.wait(job_id).status is JobStatus.SUCCEEDED
    platform.requests.job("ahead-cancel-c", sleep_s=0.01)  # and the slot takes new work
    assert platform.results.wait("ahead-cancel-c").status is JobStatus.SUCCEEDED


def _occupy_every_worker(platform: Platform, prefix: str, sleep_s: float) -> list[str]:
    """One job of ``sleep_s`` per slot, and wait until each Dask worker runs one: a job submitted now queues
    behind one of them (a worker still starting would leave two on one worker, one behind the other)."""
    slots = platform.service.consumer.slots
    blockers = [f"{prefix}{i}" for i in range(slots)]
    for job_id in blockers:
        platform.requests.job(job_id, sleep_s=sleep_s)
    client = platform.backend._inner._client  # type: ignore[attr-defined]  # the real DaskBackend's client
    wait_for(lambda: sum(1 for keys in client.processing().values() if keys) == slots, 60,
             "every worker running a job")
    return blockers


@pytest.mark.timeout(300)
def test_a_repeated_request_is_answered_from_the_result_cache_without_a_run(platform: Platform) -> None:
    """docs/scheduler.md, "Result cache": a repeat is the first result bit for bit, marked, and nothing runs."""
    params = {"paths": 3000, "seed": 4511, "strike": 95.0}
    platform.requests.job("cache-first", "european_option", **params)
    first = platform.results.wait("cache-first", timeout_s=240)  # may compile its kernel (see above)
    assert first.status is JobStatus.SUCCEEDED and not first.cached, first.error
    hits = _cache_hits(platform)

    platform.requests.job("cache-repeat", "european_option", **{**params, "strike": 95})  # 95 for 95.0
    repeat = platform.results.wait("cache-repeat")
    assert repeat.cached and repeat.cached_from == "cache-first" and repeat.status is JobStatus.SUCCEEDED
    assert json.dumps(repeat.result) == json.dumps(first.result) and repeat.artifacts == first.artifacts
    assert "cache-repeat" not in platform.backend.runs  # no task went to Dask for it
    assert _cache_hits(platform) == hits + 1
    assert platform.api.http.get("/status").json()["result_cache"]["hits"] == hits + 1
    assert platform.service.store.get("cache-repeat") == repeat

    platform.requests.raw({"job_id": "cache-opted-out", "type": "european_option", "params": params,
                           "cache": False})
    platform.requests.job("cache-other-seed", "european_option", **{**params, "seed": 4512})
    for job_id in ("cache-opted-out", "cache-other-seed"):
        ran = platform.results.wait(job_id, timeout_s=60)
        assert ran.status is JobStatus.SUCCEEDED and not ran.cached and platform.backend.runs[job_id] == [1]


def _cache_hits(platform: Platform) -> float:
    registry = platform.service.metrics.registry
    return registry.get_sample_value(contract.METRICS.result_cache_hits_total, {"type": "european_option"}) or 0.0
