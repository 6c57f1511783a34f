"""Pools, metrics and status through the real HTTP API of the running service."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from runtime.protocol import contract
from runtime.protocol.contract import METRICS
from runtime.scheduler.service import LOCAL_POOL
from tests.runtime.scheduler import ON_THE_PACKAGE_PLATFORM
from tests.runtime.scheduler.conftest import Platform
from tests.runtime.scheduler.platform import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), ON_THE_PACKAGE_PLATFORM]


def _samples(platform: Platform) -> dict[tuple[str, tuple], float]:
    text = platform.api.http.get(contract.METRICS_PATH).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _pool(platform: Platform) -> dict:
    return platform.api.http.get("/pools").json()[0]


def test_metrics_count_jobs_and_show_leadership_and_pools(platform: Platform) -> None:
    platform.requests.job("metrics-1")
    platform.results.wait("metrics-1")
    samples = _samples(platform)
    assert samples[(METRICS.jobs_total, (("status", "succeeded"), ("type", "noop")))] >= 1
    assert samples[(METRICS.maintenance_mode, ())] == 0
    wait_for(lambda: _samples(platform).get((METRICS.leader, ())) == 1, 30, "the leader gauge")
    wait_for(lambda: _samples(platform).get((METRICS.pool_workers, (("pool", LOCAL_POOL),))) == 2, 30,
             "the pool gauge")
    assert all(name.startswith(contract.METRICS_PREFIX) for name, _ in samples)


def test_thread_cpu_names_the_replicas_threads_and_needs_the_token(platform: Platform) -> None:
    assert platform.api.anonymous.get("/status/threads").status_code == 401
    threads = platform.api.http.get("/status/threads").json()
    names = {thread["name"] for thread in threads}
    assert {"MainThread", "gpurt-job-0"} <= names  # the process's own thread and a job slot's, by name
    assert all(thread["cpu_s"] >= 0 for thread in threads)
    assert [t["cpu_s"] for t in threads] == sorted((t["cpu_s"] for t in threads), reverse=True)


def test_status_and_leader(platform: Platform) -> None:
    status = platform.api.http.get("/status").json()
    assert status["mode"] == "normal" and status["consuming"] and status["slots"] == 2
    leader = platform.api.http.get("/status/leader").json()
    assert leader["is_leader"] is True and leader["holder"] == leader["identity"]
    assert platform.api.http.get("/jobs/never-submitted").status_code == 404


def test_pools_scale_stop_and_come_back(platform: Platform) -> None:
    assert platform.api.anonymous.post(f"/pools/{LOCAL_POOL}/scale", json={"workers": 3}).status_code == 401
    try:
        scaled = platform.api.http.post(f"/pools/{LOCAL_POOL}/scale", json={"workers": 3}).json()
        assert scaled["desired"] == 3 and scaled["status"] in {"scaling", "running"}
        # Flow control follows the pool at once: the stream is replaced with three slots.
        assert platform.api.http.get("/status").json()["slots"] == 3
        wait_for(lambda: _pool(platform) == {"id": LOCAL_POOL, "desired": 3, "workers": 3, "gpus_per_worker": 0,
                                             "status": "running", "provisioning": None}, 60, "three workers")
        assert platform.api.http.post("/pools/stop-all").json()[0]["desired"] == 0
        wait_for(lambda: _pool(platform)["status"] == "stopped", 60, "the pool stopped")
        evictions = (METRICS.pool_evictions_total, (("pool", LOCAL_POOL),))
        assert _samples(platform)[evictions] == 1
        assert platform.api.http.post("/pools/gpu-a100/stop").status_code == 404
        assert platform.api.http.post(f"/pools/{LOCAL_POOL}/scale", json={"workers": -1}).status_code == 422
    finally:
        platform.api.http.post(f"/pools/{LOCAL_POOL}/scale", json={"workers": 2})
    wait_for(lambda: _pool(platform)["workers"] == 2, 60, "the pool back at two workers")
    platform.service.follow_slots()  # what the follower thread does every period
    assert platform.api.http.get("/status").json()["slots"] == 2
    platform.requests.job("after-pools")
    assert platform.results.wait("after-pools").status.value == "succeeded"
