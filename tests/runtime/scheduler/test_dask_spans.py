"""The Dask scheduler forgets finished spans: its span and TaskGroup records stay bounded over many jobs.

One job at a time, as the gpu-scheduler submits them on an otherwise idle cluster, opens a new default
span per job; without ``forget_finished_spans`` every one of them, with its TaskGroup, stays forever.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from runtime.scheduler.backends.dask_spans import forget_finished_spans

JOBS = 40
RESULT_S = 30.0
# "Forget whatever has finished", for the tests. Not 0: a worker stamps a task's end in the Dask scheduler's
# clock through an estimated offset (``Worker.scheduler_delay``, from its heartbeat's round trip), and on a
# loaded machine that estimate can put a task that has just ended some milliseconds in the scheduler's future.
NO_GRACE_S = -RESULT_S


def _job(x: int) -> int:
    return x + 1


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as dask_client:
        yield dask_client


def _spans(dask_client: Any) -> Any:
    return dask_client.cluster.scheduler.extensions["spans"]


def _one_by_one(dask_client: Any, jobs: int, tag: str) -> None:
    scheduler = dask_client.cluster.scheduler
    for index in range(jobs):  # each after the last is forgotten: the cluster is idle between jobs
        key = f"gpurt-{tag}-{index}-1-0a1b2c3d"  # the shape of runtime.scheduler.backends.dask keys
        future = dask_client.submit(_job, index, key=key, pure=False)
        assert future.result(timeout=RESULT_S) == index + 1
        del future
        forgotten = threading.Event()
        for _ in range(int(RESULT_S / 0.01)):
            if key not in scheduler.tasks:
                forgotten.set()
                break
            forgotten.wait(0.01)
        assert forgotten.is_set(), f"the Dask scheduler kept {key}"


def _task_groups_alive() -> int:
    from distributed.scheduler import TaskGroup

    gc.collect()
    return sum(isinstance(o, TaskGroup) for o in gc.get_objects())


def test_finished_spans_are_forgotten_and_what_they_held_is_freed(client: Any) -> None:
    spans = _spans(client)
    before = len(spans.spans)
    elsewhere = _task_groups_alive()  # other tests' clusters in this process hold TaskGroups of their own
    _one_by_one(client, JOBS, "leak")
    assert len(spans.spans) >= before + JOBS // 2  # the growth this guards against
    groups = _task_groups_alive()
    assert groups >= JOBS // 2

    dropped = client.run_on_scheduler(forget_finished_spans, grace_s=NO_GRACE_S)

    assert dropped >= JOBS // 2
    assert len(spans.spans) <= 1 and len(spans.root_spans) == len(spans.spans)
    assert all(len(found) <= 1 for found in spans.spans_search_by_name.values())
    # The TaskGroups they held are theirs no more; what still holds some is Dask's bounded history of
    # computations (distributed.diagnostics.computations.max-history), not the spans.
    assert sum(len(span.groups) for span in spans.spans.values()) <= 1
    scheduler = client.cluster.scheduler
    history = {id(group) for computation in scheduler.computations for group in computation.groups}
    assert _task_groups_alive() - elsewhere <= len(history | {id(g) for g in scheduler.task_groups.values()}) \
        < groups + 1
    _one_by_one(client, 3, "after")  # the scheduler carries on: new spans, heartbeats, results


def test_a_span_with_a_running_task_or_a_recent_end_is_kept(client: Any) -> None:
    from distributed import Event

    spans = _spans(client)
    client.run_on_scheduler(forget_finished_spans, grace_s=NO_GRACE_S)
    release = Event("gpurt-test-release", client=client)
    running = client.submit(lambda: release.wait(RESULT_S), key="gpurt-running-0-1-0a1b2c3d", pure=False)
    started = threading.Event()
    while not started.is_set():  # the task is on the scheduler once its group exists
        started.wait(0.05) if not client.cluster.scheduler.task_groups else started.set()
    groups = list(client.cluster.scheduler.task_groups.values())
    client.run_on_scheduler(forget_finished_spans, grace_s=NO_GRACE_S)  # may still drop spans of earlier tests' jobs
    assert groups and all(group.span_id in spans.spans for group in groups)  # never the running task's
    release.set()
    assert running.result(timeout=RESULT_S) is True
    del running
    _one_by_one(client, 1, "recent")
    assert client.run_on_scheduler(forget_finished_spans) == 0  # within the grace: a heartbeat may still name it
    assert len(spans.spans) >= 1


def test_a_heartbeat_naming_a_forgotten_span_keeps_its_worker(client: Any) -> None:
    """A worker that reports metrics against a span after it was forgotten is not closed for it."""
    _one_by_one(client, 2, "late")
    gone = [span.id for span in list(_spans(client).spans.values())]
    assert client.run_on_scheduler(forget_finished_spans, grace_s=NO_GRACE_S) >= 1
    scheduler = client.cluster.scheduler
    worker = next(iter(scheduler.workers.values()))
    late = {("execute", span_id, "prefix", "thread-cpu", "seconds"): 0.5 for span_id in gone}
    _spans(client).heartbeat(worker, late)  # Dask's own lookup raised KeyError here, closing the worker
    _one_by_one(client, 1, "after-late")
    assert list(client.scheduler_info()["workers"]) == [worker.address]


def test_the_span_metadata_dask_has_seen_is_forgotten_too(client: Any) -> None:
    """Dask keeps the id of every job's span metadata in one class-wide set; the clean-up round empties it."""
    from distributed.spans import Span

    _one_by_one(client, JOBS, "meta")
    assert len(Span._metadata_seen) > 0  # what the clean-up is for: Dask added this run's jobs
    client.run_on_scheduler(forget_finished_spans)  # any grace: the set is emptied every round
    assert len(Span._metadata_seen) == 0
    _one_by_one(client, 3, "meta-after")  # the scheduler carries on
