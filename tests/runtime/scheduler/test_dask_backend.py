"""DaskBackend on a real in-process Dask cluster: a job costs its task and nothing else; cancel still works."""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from kernels.errors import JobCancelled, PermanentJobError
from runtime.protocol import contract
from runtime.protocol.messages import JobRequest
from runtime.scheduler.backends.dask_workers import DaskWorkers
from runtime.worker.task import cancel_event_name
from tests.runtime.scheduler.platform import DaskBackends, wait_for

JOBS = 20
# The Dask scheduler handlers a job must not call: worker lookups and cancel-event round trips.
PER_JOB_HANDLERS = ("identity", "event_set", "event_clear", "event_is_set", "event_wait")


@pytest.fixture(scope="module")
def dask() -> Iterator[tuple[Any, Counter[str]]]:
    """An in-process cluster whose scheduler counts the calls to ``PER_JOB_HANDLERS``."""
    from distributed import Client, LocalCluster

    calls: Counter[str] = Counter()

    def counted(name: str, handler: Any) -> Any:
        @functools.wraps(handler)  # keeps the signature: Dask passes ``comm`` only to handlers that take it
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return handler(*args, **kwargs)
        return wrapper

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        for name in PER_JOB_HANDLERS:
            cluster.scheduler.handlers[name] = counted(name, cluster.scheduler.handlers[name])
        yield client, calls


@pytest.fixture(scope="module")
def backends(dask: tuple[Any, Counter[str]]) -> Iterator[DaskBackends]:
    made = DaskBackends(dask[0])
    yield made
    made.close()


def _noop(job_id: str, **params: float) -> JobRequest:
    return JobRequest.model_validate({"job_id": job_id, "type": "noop", "params": params})


def test_a_job_asks_the_dask_scheduler_for_no_events_and_rarely_for_workers(
        dask: tuple[Any, Counter[str]], backends: DaskBackends) -> None:
    _, calls = dask
    backend = backends.make(device="cpu")
    calls.clear()
    for i in range(JOBS):
        assert backend.run(_noop(f"cheap-{i}"), attempt=1).summary is not None
    assert sum(calls[name] for name in PER_JOB_HANDLERS if name.startswith("event_")) == 0
    # One worker lookup per 2 s at most (the client's own periodic refresh may add one): not one per job.
    assert calls["identity"] <= JOBS // 4


def test_a_running_job_asks_the_dask_scheduler_once_whether_it_was_cancelled(
        dask: tuple[Any, Counter[str]], backends: DaskBackends) -> None:
    # A job waiting on its GPU must not cost the Dask scheduler a round trip several times a second: the
    # poll this replaced read the cancel event four times a second (about 12 reads over this job).
    _, calls = dask
    backend = backends.make(device="cpu")
    calls.clear()
    assert backend.run(_noop("waits-3s", sleep_s=3), attempt=1).summary is not None
    assert calls["event_is_set"] == 1  # the one look a quarter second in; the next is 10 s in


def test_a_cancelled_job_stops_and_leaves_no_event_behind(
        dask: tuple[Any, Counter[str]], backends: DaskBackends, monkeypatch: pytest.MonkeyPatch) -> None:
    from distributed import Event

    from runtime.worker import task as worker_task

    client, calls = dask
    backend = backends.make(device="cpu")
    # The worker runs in this process: with no look after its first, only the push can stop the job.
    monkeypatch.setattr(worker_task, "CANCEL_RECHECK_S", 3600.0)
    calls.clear()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            backend.run(_noop("long-1", sleep_s=60), attempt=1)
        except BaseException as exc:  # the test inspects whatever ended the run
            outcome.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    wait_for(lambda: calls["event_is_set"] == 1, 30, "the job's first look at its cancel event")
    assert backend.cancel("long-1")
    runner.join(30)
    assert not runner.is_alive() and len(outcome) == 1 and isinstance(outcome[0], JobCancelled)
    assert calls["event_is_set"] == 1  # stopped by the push, not by a look
    assert not Event(cancel_event_name("long-1", 1), client=client).is_set()  # cleared, so deleted
    assert not backend.cancel("long-1")  # it no longer runs here


class _Scheduler:
    """A ``distributed.Client`` stand-in whose worker list can change; counts the reads."""

    def __init__(self) -> None:
        self.workers: dict[str, dict[str, Any]] = {}
        self.reads = 0

    def scheduler_info(self) -> dict[str, Any]:
        self.reads += 1
        return {"workers": self.workers}


def test_the_worker_view_is_read_again_only_when_it_is_older_than_its_ttl() -> None:
    client, now = _Scheduler(), [0.0]
    workers = DaskWorkers(client, ttl_s=2.0, clock=lambda: now[0])
    assert not workers.has_gpus() and client.reads == 1
    client.workers["w1"] = {"resources": {contract.DASK_GPU_RESOURCE: 1}, "nthreads": 1}
    now[0] = 1.9
    assert not workers.has_gpus() and client.reads == 1  # within the TTL: the cached answer
    now[0] = 2.0
    assert workers.has_gpus() and client.reads == 2  # GPU workers arrived: seen once the view is stale
    assert len(workers.read()) == 1 and client.reads == 3  # an explicit read always asks


def _letters(number: int) -> str:
    return "".join(chr(ord("a") + int(digit)) for digit in str(number))


def test_job_ids_of_letters_only_leave_no_task_prefix_per_job(
        dask: tuple[Any, Counter[str]], backends: DaskBackends) -> None:
    # Dask keeps a TaskPrefix per distinct key prefix for as long as it runs; a prefix per job id would
    # grow with every job (dask.utils.key_split takes the key's leading all-letter words).
    client, _ = dask
    backend = backends.make(device="cpu")
    prefixes = client.cluster.scheduler.task_prefixes
    before = set(prefixes)
    for i in range(JOBS):
        backend.run(_noop(f"eod-book-{_letters(i)}"), attempt=1)
    assert len(set(prefixes) - before) <= 1


def test_the_memo_of_task_key_prefixes_is_emptied_on_the_scheduler_and_on_every_worker(
        dask: tuple[Any, Counter[str]], backends: DaskBackends) -> None:
    """Dask memoises the prefix of every task key it splits (up to 100,000): one entry per job unless emptied.
    This cluster's scheduler and worker run in this process, so they share its memo."""
    from dask.utils import key_split

    from runtime.worker.key_names import ForgetKeyNames

    client, _ = dask
    backend = backends.make(device="cpu")
    assert all(client.run(lambda dask_worker: ForgetKeyNames.name in dask_worker.plugins).values())
    for i in range(JOBS):
        backend.run(_noop(f"memo-{i}"), attempt=1)
    assert key_split.cache_info().currsize >= JOBS  # every job's key split, none forgotten yet
    backend.forget_finished()  # the clean-up round, on the Dask scheduler
    assert key_split.cache_info().currsize == 0

    client.register_plugin(ForgetKeyNames(period_s=0.05))  # the workers' own timer, made quick
    for i in range(JOBS):
        backend.run(_noop(f"memo-again-{i}"), attempt=1)
    wait_for(lambda: key_split.cache_info().currsize == 0, 10, "the workers' timer to empty the memo")


def test_a_pack_runs_as_one_task_and_a_job_cancelled_in_it_stops_alone(
        dask: tuple[Any, Counter[str]], backends: DaskBackends) -> None:
    from distributed import Event

    from kernels.errors import PermanentJobError

    client, _ = dask
    backend = backends.make(device="cpu")
    pack = [(_noop("pk-a"), 1), (_noop("pk-long", sleep_s=60), 1),
            (JobRequest.model_validate({"job_id": "pk-bad", "type": "noop", "params": {"fail": "permanent"}}), 1),
            (_noop("pk-b"), 1)]
    outcomes: list[Any] = []
    runner = threading.Thread(target=lambda: outcomes.extend(backend.run_pack(pack)), daemon=True)
    runner.start()
    wait_for(lambda: backend.cancel("pk-long"), 30, "the pack to be running")
    runner.join(30)
    assert not runner.is_alive() and len(outcomes) == 4
    assert outcomes[0].summary is not None and outcomes[3].summary is not None  # the others ran
    assert isinstance(outcomes[1], JobCancelled)  # stopped alone, at its first checkpoint
    assert isinstance(outcomes[2], PermanentJobError)  # failed alone
    assert not Event(cancel_event_name("pk-long", 1), client=client).is_set()  # cleared, so deleted
    assert not backend.cancel("pk-a")  # nothing of the pack runs here any more


@pytest.mark.integration  # its own cluster: one worker advertising only the CPU resource, as in the cloud
def test_a_noop_runs_on_the_cpu_worker_and_a_kernel_job_waits_for_a_gpu() -> None:
    """GPU pools at zero, the always-up CPU worker running: the probe's noop runs at once, a kernel job is held
    for a GPU worker (the autoscaler's to start) instead of running on the CPU worker."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                      resources={contract.DASK_CPU_RESOURCE: 1}) as cluster, Client(cluster) as client:
        made = DaskBackends(client)
        try:
            backend = made.make(device="cpu", require_gpu=True)
            assert backend.run(_noop("probe"), attempt=1).summary["slept_s"] == 0
            kernel = JobRequest.model_validate({"job_id": "held", "type": "european_option",
                                                "params": {"paths": 10_000}, "timeout_s": 60})
            backend.submit([(kernel, 1)])
            state = wait_for(lambda: {ts.state for key, ts in cluster.scheduler.tasks.items()
                                      if "held" in str(key)} & {"no-worker", "memory", "processing"},
                             30, "the kernel job's task on the Dask scheduler")
            assert state == {"no-worker"}  # held for a worker with a GPU: none runs it here
        finally:
            made.close()


def test_a_job_that_runs_out_of_its_own_timeout_fails_permanently(backends: DaskBackends) -> None:
    # issue 43: sleep_s 0.99 in timeout_s 1.0 timed out on each of five deliveries into the dead-letter queue.
    # The request model refuses a sleep not shorter than the timeout; a copy skips it, so the timeout is certain.
    backend = backends.make(device="cpu")
    request = _noop("over-budget", sleep_s=30).model_copy(update={"timeout_s": 1.0})
    with pytest.raises(PermanentJobError, match=r"timed out after 1 s, its timeout_s"):
        backend.run(request, attempt=1)
