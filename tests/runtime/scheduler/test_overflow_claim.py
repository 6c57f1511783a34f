"""Overflow never runs a job twice: the worker's start claim against the scheduler's spill decision, on a real
in-process Dask cluster (one worker, one thread), with Vertex AI a recording stand-in."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from runtime.protocol.messages import JobRequest
from runtime.scheduler.backends.base import Execution
from runtime.scheduler.backends.overflow import OverflowBackend
from runtime.worker.task import spill_event_names
from tests.runtime.scheduler.platform import DaskBackends

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


class RecordingVertex:
    """Runs nothing: records the jobs handed to it and answers at once."""

    name = "vertex"

    def __init__(self) -> None:
        self.ran: list[str] = []

    def run(self, request: JobRequest, *, attempt: int, **_options: Any) -> Execution:
        self.ran.append(request.job_id)
        return Execution(summary={"on": "vertex"})

    def cancel(self, job_id: str) -> bool:
        return False

    def gpu_slots(self) -> int:
        return 0

    def ready(self) -> bool:
        return True

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def backends() -> Iterator[DaskBackends]:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        made = DaskBackends(client)
        yield made
        made.close()


def _noop(job_id: str, sleep_s: float = 0.0) -> JobRequest:
    return JobRequest.model_validate({"job_id": job_id, "type": "noop", "params": {"sleep_s": sleep_s}})


def _overflow(backends: DaskBackends, vertex: RecordingVertex, spill_after_s: float) -> OverflowBackend:
    return OverflowBackend(backends.make(device="cpu"), vertex, spill_after_s=spill_after_s)  # type: ignore[arg-type]


def test_a_job_that_began_on_its_worker_is_not_spilled_even_if_it_outlasts_the_budget(
        backends: DaskBackends) -> None:
    vertex = RecordingVertex()
    outcome = _overflow(backends, vertex, 0.5).submit([(_noop("long-begun", sleep_s=2.0), 1)]).wait()[0]

    assert not isinstance(outcome, Exception)
    assert outcome.backend == "dask" and outcome.summary == {"slept_s": 2.0}
    assert vertex.ran == []


def test_a_queued_job_spills_and_its_worker_never_runs_it(backends: DaskBackends) -> None:
    vertex = RecordingVertex()
    overflow = _overflow(backends, vertex, 0.5)
    busy = overflow.submit([(_noop("holder", sleep_s=2.0), 1)])
    queued = overflow.submit([(_noop("queued"), 1)])

    spilled = queued.wait()[0]
    held = busy.wait()[0]

    assert not isinstance(spilled, Exception) and spilled.backend == "vertex"
    assert spilled.spilled_after_s is not None and spilled.spilled_after_s >= 0.5
    assert not isinstance(held, Exception) and held.backend == "dask"
    assert vertex.ran == ["queued"]


def test_a_worker_that_finds_the_job_spilled_refuses_it_and_it_runs_on_vertex_once(backends: DaskBackends) -> None:
    # The race's other side: the worker marked its start just as the timer fired, so the timer left the job to it,
    # but the worker then found the spill mark and refused the job. Produced here by setting both marks before
    # the worker begins (a holder job keeps it busy); the job must run on Vertex AI exactly once.
    from distributed import Event

    vertex = RecordingVertex()
    overflow = _overflow(backends, vertex, 0.5)
    client = backends.make(device="cpu").client
    busy = overflow.submit([(_noop("holder-2", sleep_s=1.5), 1)])
    started, spill = spill_event_names("raced", 1)
    Event(started, client=client).set()
    Event(spill, client=client).set()
    outcome = overflow.submit([(_noop("raced"), 1)]).wait()[0]
    busy.wait()

    assert not isinstance(outcome, Exception) and outcome.backend == "vertex"
    assert vertex.ran == ["raced"]
    assert not Event(started, client=client).is_set() and not Event(spill, client=client).is_set()  # cleared


def test_callbacks_wait_for_the_custom_job_of_a_spilled_job(backends: DaskBackends) -> None:
    vertex = RecordingVertex()
    overflow = _overflow(backends, vertex, 0.3)
    busy = overflow.submit([(_noop("holder-3", sleep_s=1.5), 1)])
    queued = overflow.submit([(_noop("queued-3"), 1)])
    called = threading.Event()
    queued.add_done_callback(called.set)

    assert called.wait(timeout=30)
    assert queued.done() and vertex.ran == ["queued-3"]
    outcome: Any = queued.wait()[0]
    assert outcome.backend == "vertex"
    busy.wait()
