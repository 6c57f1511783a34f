"""A result store outage on the real scheduler: real emulator, real LocalCluster, the store's fsspec seam failing.

While the store fails, the replica stops intake (``/readyz`` 503, the stream closed), the jobs it holds
wait with their messages unsettled, nothing is nacked or dead-lettered; once a probe finds the store
back, every job ends ``succeeded`` exactly once, at its first delivery. Subscriptions here redeliver
after 1 s, so a nack during the outage would show as attempt 2 or more.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from runtime.local.broker import EmulatorHandle
from runtime.protocol import contract
from runtime.protocol.messages import JobStatus
from runtime.pubsub.admin import subscription_path
from runtime.scheduler.api import create_app
from runtime.scheduler.metrics import SchedulerMetrics
from runtime.scheduler.service import Mode, Service
from runtime.scheduler.settings import Settings
from runtime.scheduler.store import ResultStore
from runtime.scheduler.window import NARROW_PLACES_PER_SLOT
from tests.runtime.scheduler.platform import Requests, ResultListener, create_topology, wait_for
from tests.runtime.scheduler.store.failing_fs import FailingFileSystem

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PROJECT = "outage-it"
SLOTS = 2
# More than the stream's places: the rest must stay in the subscription, not be pulled and nacked. With every
# place taken by a message it knows, the stream is quiet at once and intake stops without a wait.
JOBS = SLOTS * NARROW_PLACES_PER_SLOT + 1
# Probe failures to sit through before the store comes back: at the 2 s probe period, several of the
# subscriptions' 1 s redelivery backoffs.
OUTAGE_PROBES = 3
WAIT_S = 60.0
TOKEN = "outage-token"  # /readyz names its reasons (the store's error) only to the token's holder


@dataclass
class Outage:
    emulator: EmulatorHandle
    service: Service
    fs: FailingFileSystem
    results: ResultListener
    requests: Requests
    http: TestClient

    def subscription(self, name: str) -> object:
        return self.emulator.stats().subscription(subscription_path(PROJECT, name))


@pytest.fixture(scope="module")
def outage(emulator: EmulatorHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outage]:
    create_topology(emulator.address, PROJECT)
    folder: Path = tmp_path_factory.mktemp("outage-store")
    settings = Settings.from_env({
        "PUBSUB_EMULATOR_HOST": emulator.address, "GPURT_PROJECT": PROJECT, "GPURT_LOCAL_WORKERS": "1",
        "GPURT_MAX_IN_FLIGHT": str(SLOTS), "GPURT_RESULT_STORE": folder.as_uri(), "GPURT_DEVICE": "cpu",
        contract.SchedulerEnv.CONTROL_TOKEN: TOKEN,
    })
    service = Service(settings, metrics=SchedulerMetrics())
    fs = FailingFileSystem()
    service.store = ResultStore(folder.as_uri(), fs=fs)  # the same folder, behind a filesystem that can fail
    service.start()
    results, requests = ResultListener(emulator.address, PROJECT), Requests(emulator.address, PROJECT)
    try:
        requests.job("outage-warm-up")
        assert results.wait("outage-warm-up", WAIT_S).status is JobStatus.SUCCEEDED
        yield Outage(emulator, service, fs, results, requests,
                     TestClient(create_app(service), headers={"Authorization": f"Bearer {TOKEN}"}))
    finally:
        fs.mode = None
        requests.close()
        results.close()
        service.stop(timeout_s=10)


@pytest.mark.parametrize("mode", ["read-only", "unreachable", "full"])
def test_a_store_outage_stops_intake_and_costs_no_delivery_attempt(outage: Outage, mode: str) -> None:
    service, fs = outage.service, outage.fs
    dead_before = outage.subscription(contract.REQUEST_DLQ_SUBSCRIPTION).undelivered  # type: ignore[attr-defined]
    jobs = [f"outage-{mode}-{i}" for i in range(JOBS)]

    fs.mode = mode  # type: ignore[assignment]
    for job_id in jobs:
        outage.requests.job(job_id, sleep_s=0.2)
    wait_for(lambda: not service.store_health.available, WAIT_S, "the breaker to open")
    assert service.consumer is not None
    wait_for(lambda: not service.consumer.running, WAIT_S, "intake to stop")  # type: ignore[union-attr]
    ready = outage.http.get(contract.READY_PATH)
    assert ready.status_code == 503 and "result store is unavailable" in " ".join(ready.json()["reasons"])
    assert TestClient(create_app(service)).get(contract.READY_PATH).json() == {"ready": False}  # no token: no reasons

    failures = fs.failures
    wait_for(lambda: fs.failures >= failures + OUTAGE_PROBES, WAIT_S, "the probe to fail a few times")
    request_sub = outage.subscription(contract.REQUEST_SUBSCRIPTION)
    held = request_sub.outstanding  # type: ignore[attr-defined]
    # The jobs it had (running, waiting to store, or prefetched for a slot) wait with their messages leased.
    assert 1 <= held <= SLOTS * NARROW_PLACES_PER_SLOT
    assert request_sub.undelivered == JOBS - held  # type: ignore[attr-defined]  # the rest never pulled
    assert all(outage.results.of(job_id) == [] for job_id in jobs)

    fs.mode = None
    for job_id in jobs:
        outage.results.wait(job_id, WAIT_S)
    outage.requests.job(f"outage-{mode}-after")  # once this is answered, a duplicate of the others would be too
    outage.results.wait(f"outage-{mode}-after", WAIT_S)
    for job_id in jobs:
        (result,) = outage.results.of(job_id)
        assert result.status is JobStatus.SUCCEEDED and result.attempt == 1, result
    assert outage.subscription(contract.REQUEST_DLQ_SUBSCRIPTION).undelivered == dead_before  # type: ignore[attr-defined]
    assert service.readiness() == [] and outage.http.get(contract.READY_PATH).status_code == 200


def test_a_replica_drained_during_an_outage_stays_drained_when_the_store_returns(outage: Outage) -> None:
    service, fs = outage.service, outage.fs
    fs.mode = "read-only"
    outage.requests.job("outage-drained-0")
    wait_for(lambda: not service.store_health.available, WAIT_S, "the breaker to open")
    service.set_mode(Mode.DRAIN)
    fs.mode = None
    outage.results.wait("outage-drained-0", WAIT_S)  # the job it held still finishes
    wait_for(lambda: service.store_health.available, WAIT_S, "the breaker to close")
    assert service.consumer is not None and not service.consumer.running  # the operator's drain wins
    service.set_mode(Mode.NORMAL)
    wait_for(lambda: service.consumer.running, WAIT_S, "intake to resume")  # type: ignore[union-attr]
    outage.requests.job("outage-drained-1")
    assert outage.results.wait("outage-drained-1", WAIT_S).attempt == 1
