"""Sharded jobs on a real in-process Dask cluster: the merged result, per-shard retry, cancel and progress."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kernels import shards as kernel_shards
from kernels.errors import JobCancelled, PermanentJobError, TransientJobError
from runtime.protocol.messages import JobRequest
from runtime.scheduler.backends import shards as backend_shards
from runtime.scheduler.backends.dask_cancel import CancelSignal
from runtime.scheduler.backends.shards import TOPIC_GRACE_S, ProgressTopics, ShardedJob
from runtime.worker.task import cancel_event_name
from tests.kernels.job_input import run_raw
from tests.runtime.scheduler.platform import DaskBackends, wait_for

WORKERS = 3
EUROPEAN = {"paths": 300_000, "seed": 7}  # 10 blocks
VAR = {"paths": 30_000, "exposures": [1e6, 5e5], "volatilities": [0.2, 0.35], "confidence": 0.99, "seed": 4}
# Long enough on one CPU thread per worker (tens of seconds) that a cancel lands mid-shard.
LONG = {"paths": 500_000_000, "steps": 64, "seed": 1}
MERGE_RTOL = 1e-12  # the sums are added shard by shard instead of chunk by chunk


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """Three single-thread workers in this process (the kernels' numba threading layer is thread-safe)."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as dask_client:
        yield dask_client


@pytest.fixture(scope="module")
def backends(client: Any) -> Iterator[DaskBackends]:
    made = DaskBackends(client)
    yield made
    made.close()


def _request(job_id: str, job_type: str, params: dict[str, Any]) -> JobRequest:
    return JobRequest.model_validate({"job_id": job_id, "type": job_type, "params": params, "timeout_s": 120})


def test_a_sharded_job_gives_the_unsharded_result_and_says_how_it_ran(backends: DaskBackends) -> None:
    backend = backends.make(device="cpu", shard_paths=100_000)
    whole = run_raw("european_option", EUROPEAN, device="cpu").summary
    out = backend.run(_request("sharded-eu", "european_option", EUROPEAN), attempt=1)
    assert out.summary["shards"] == 3 and 1 <= out.summary["workers"] <= WORKERS
    assert out.summary["estimate"] == pytest.approx(whole["estimate"], rel=MERGE_RTOL)
    assert out.summary["std_error"] == pytest.approx(whole["std_error"], rel=MERGE_RTOL)
    var_whole = run_raw("portfolio_var", VAR, device="cpu").summary
    var_backend = backends.make(device="cpu", shard_paths=10_000)
    var_out = var_backend.run(_request("sharded-var", "portfolio_var", VAR), attempt=1).summary
    assert var_out["shards"] == 3
    assert (var_out["var"], var_out["cvar"], var_out["var_ci"]) == (var_whole["var"], var_whole["cvar"],
                                                                     var_whole["var_ci"])


def test_a_job_under_the_shard_size_runs_as_one_task(backends: DaskBackends) -> None:
    out = backends.make(device="cpu", shard_paths=10**6).run(_request("one", "european_option", EUROPEAN),
                                                                    attempt=1)
    assert "shards" not in out.summary


def test_a_shard_failing_transiently_is_rerun_alone(backends: DaskBackends, monkeypatch: pytest.MonkeyPatch) -> None:
    real = kernel_shards.run_shard
    runs: list[int] = []
    scales: dict[int, list[float]] = {}
    lock = threading.Lock()

    def flaky(job_type: str, params: Any, index: int, shards: int, **kwargs: Any) -> Any:
        with lock:
            runs.append(index)
            scales.setdefault(index, []).append(kwargs["chunk_scale"])
            first_of_one = index == 1 and runs.count(1) == 1
        if first_of_one:
            raise TransientJobError("CUDA out of memory even for the smallest chunk")
        return real(job_type, params, index, shards, **kwargs)

    monkeypatch.setattr(kernel_shards, "run_shard", flaky)  # the workers run in this process
    whole = run_raw("european_option", EUROPEAN, device="cpu").summary
    out = backends.make(device="cpu", shard_paths=100_000).run(
        _request("flaky", "european_option", EUROPEAN), attempt=1)
    assert sorted(runs) == [0, 1, 1, 2]
    assert scales == {0: [1.0], 1: [1.0, 0.5], 2: [1.0]}  # only the rerun launches smaller chunks
    assert out.summary["estimate"] == pytest.approx(whole["estimate"], rel=MERGE_RTOL)


def _record_stopped_shards(monkeypatch: pytest.MonkeyPatch, failing_shard: int | None = None) -> set[int]:
    """Wrap the shard entry point: the returned set collects the index of each shard stopped at a checkpoint;
    shard ``failing_shard`` (if given) fails for good instead of running."""
    real = kernel_shards.run_shard
    stopped: set[int] = set()

    def recording(job_type: str, params: Any, index: int, shards: int, **kwargs: Any) -> Any:
        if index == failing_shard:
            raise PermanentJobError("the kernel refuses these params")
        try:
            return real(job_type, params, index, shards, **kwargs)
        except JobCancelled:
            stopped.add(index)
            raise

    monkeypatch.setattr(kernel_shards, "run_shard", recording)
    return stopped



def test_a_straggling_shard_gets_a_backup_and_the_first_to_finish_is_kept(
        client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    real = kernel_shards.run_shard
    superseded: list[tuple[int, float]] = []
    finished: list[tuple[int, float]] = []

    def straggling(job_type: str, params: Any, index: int, shards: int, **kwargs: Any) -> Any:
        if (index, kwargs["chunk_scale"]) == (1, 1.0):  # shard 1's first attempt hangs, as on a sick device
            stop = kwargs["should_stop"]
            while not stop():
                time.sleep(0.02)
            superseded.append((index, kwargs["chunk_scale"]))
            raise JobCancelled("stopped")
        out = real(job_type, params, index, shards, **kwargs)
        finished.append((index, kwargs["chunk_scale"]))
        return out

    monkeypatch.setattr(kernel_shards, "run_shard", straggling)
    monkeypatch.setattr(backend_shards, "STRAGGLER_MIN_S", 0.5)
    monkeypatch.setattr(backend_shards, "STRAGGLER_CHECK_S", 0.1)
    whole = run_raw("european_option", EUROPEAN, device="cpu").summary
    cancel = CancelSignal(client, "gpurt-cancel-straggle-1")
    job = ShardedJob(client, _request("straggle", "european_option", EUROPEAN), 3, device="cpu", cancel=cancel,
                     key="gpurt-straggle-1-test", resources=None)
    out = job.result(timeout=60)
    assert out.summary["estimate"] == pytest.approx(whole["estimate"], rel=MERGE_RTOL)
    assert out.summary["std_error"] == pytest.approx(whole["std_error"], rel=MERGE_RTOL)
    assert sorted(finished) == [(0, 1.0), (1, 0.5), (2, 1.0)]  # the backup launched half the chunk
    # the hung attempt was told to stop once its backup (half the chunk) had finished; the job was not cancelled
    wait_for(lambda: superseded == [(1, 1.0)], 10, "the straggler to stop")
    assert not cancel.is_set


def test_cancel_reaches_every_shard_and_progress_is_the_shards_sum(client: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    stopped = _record_stopped_shards(monkeypatch)
    cancel = CancelSignal(client, "gpurt-cancel-long-1")
    job = ShardedJob(client, _request("long", "asian_option", LONG), WORKERS, device="cpu",
                     cancel=cancel, key="gpurt-long-1-test", resources=None)
    try:
        # every shard has reported some progress: the job's is their mean, short of done
        wait_for(lambda: len(seen := job.shard_progress()) == WORKERS and all(0 < v < 1 for v in seen.values()),
                 60, "every shard to report progress")
        shares = job.shard_progress()
        assert 0 < job.progress() < 1 and job.progress() >= sum(shares.values()) / WORKERS
        cancel.set()
        with pytest.raises(JobCancelled):
            job.result(timeout=60)
        # each shard's kernel stopped at a checkpoint, not merely its task forgotten by the Dask scheduler
        wait_for(lambda: stopped == set(range(WORKERS)), 30, "every shard to stop at a checkpoint")
    finally:
        cancel.release()
        job.cancel()


@pytest.mark.integration  # two Dask worker processes, one of them killed
@pytest.mark.slow  # seconds per shard on one thread, on purpose: the kill lands mid-shard
def test_a_lost_worker_reruns_only_its_shard() -> None:
    """Two worker processes; the one running shard 1 dies mid-shard: Dask reruns that task alone, the merge holds."""
    from distributed import Client, LocalCluster

    params = {"paths": 12_000_000, "steps": 64, "seed": 3}  # a few seconds per shard on one thread
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      env={"NUMBA_NUM_THREADS": "1"}) as cluster, Client(cluster) as dask_client:
        cancel = CancelSignal(dask_client, "gpurt-cancel-lost-1")
        job = ShardedJob(dask_client, _request("lost", "asian_option", params), 2, device="cpu",
                         cancel=cancel, key="gpurt-lost-1-test", resources=None)
        wait_for(lambda: len(job.shard_progress()) == 2, 60, "both shards to start")
        victim = next(addr for addr, keys in dask_client.processing().items() if any("shard1" in k for k in keys))
        pid = dask_client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)  # the worker process dies mid-shard; its nanny starts another
        out = job.result(timeout=120)
        runs = dask_client.run_on_scheduler(_times_started, [f"gpurt-lost-1-test-shard{i}-0" for i in (0, 1)])
    whole = run_raw("asian_option", params, device="cpu").summary
    assert out.summary["estimate"] == pytest.approx(whole["estimate"], rel=MERGE_RTOL)
    assert runs == [1, 2]


def _times_started(keys: list[str], dask_scheduler: Any = None) -> list[int]:
    """How often the Dask scheduler sent each task to a worker (from its transition log)."""
    return [sum(1 for entry in dask_scheduler.story(key) if entry[2] == "processing") for key in keys]


def test_a_shard_failing_for_good_stops_the_others(
        client: Any, backends: DaskBackends, monkeypatch: pytest.MonkeyPatch) -> None:
    from distributed import Event

    stopped = _record_stopped_shards(monkeypatch, failing_shard=0)
    backend = backends.make(device="cpu", shard_paths=-(-LONG["paths"] // WORKERS))
    with pytest.raises(PermanentJobError):
        backend.run(_request("doomed", "asian_option", LONG), attempt=1)
    assert stopped == {1, 2}  # stopped at a checkpoint before the job's failure was returned
    assert not Event(cancel_event_name("doomed", 1), client=client).is_set()  # and the event cleared after


def test_a_sharded_jobs_progress_topic_is_forgotten_after_it(client: Any) -> None:
    # Dask keeps every event topic in its scheduler, and its client keeps a topic's handler (the whole job)
    # after unsubscribing: without ProgressTopics both grew with every sharded job.
    now = [0.0]
    topics = ProgressTopics(client, grace_s=TOPIC_GRACE_S, clock=lambda: now[0])
    handlers_before = set(client._event_handlers)
    broker = client.cluster.scheduler._broker._topics
    jobs = 3
    for i in range(jobs):
        job = ShardedJob(client, _request(f"topics-{i}", "european_option", EUROPEAN), 3, device="cpu",
                         cancel=CancelSignal(client, f"gpurt-cancel-topics-{i}"), key=f"gpurt-1-topics-{i}-t",
                         resources=None, topics=topics)
        assert job.result(timeout=120).summary["shards"] == 3
    assert len(topics) == jobs
    assert not set(client._event_handlers) - handlers_before - {f"gpurt-1-topics-{i}-t-progress" for i in range(jobs)}

    assert topics.forget() == 0  # within the grace a late event may still come: nothing forgotten yet
    now[0] += TOPIC_GRACE_S
    forgotten = [0]

    def all_forgotten() -> bool:
        forgotten[0] += topics.forget()
        return forgotten[0] == jobs

    wait_for(all_forgotten, 30, "the Dask scheduler to drop the topics")
    assert len(topics) == 0
    assert set(client._event_handlers) == handlers_before
    assert not [name for name in broker if "topics-" in str(name)]
