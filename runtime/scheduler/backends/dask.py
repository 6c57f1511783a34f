"""Run jobs on a Dask cluster: the DaskCluster's scheduler in the cloud, a LocalCluster on one machine.

A job is one task (``runtime.worker.task.execute``, sealed: ``backends.dask_sealed``) submitted with
``pure=False`` (the same job id may run again after a redelivery) and ``resources={"GPU": 1}`` when the
cluster has GPU workers, so Dask places at most one job per GPU. A job over ``shard_paths`` paths runs as
shards, one task each (``backends.shards``). A worker that dies mid-task is handled by Dask itself: the
scheduler reschedules the task on another worker (up to ``distributed.scheduler.allowed-failures``).
Task-level ``retries`` stay off on purpose: they would re-run permanent failures and cancellations too;
every other retry is Pub/Sub's redelivery.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError
from datetime import UTC, datetime, timedelta
from typing import Any

from kernels.errors import PermanentJobError, TransientJobError
from kernels.params import JobType
from kernels.shards import shard_count
from runtime.protocol import contract
from runtime.protocol.messages import MAX_TIMEOUT_S, JobRequest
from runtime.scheduler.backends.base import Execution, Job, outcome_of_one
from runtime.scheduler.backends.dask_cancel import CancelSignal
from runtime.scheduler.backends.dask_sealed import submit_sealed
from runtime.scheduler.backends.dask_spans import PRUNE_PERIOD_S, forget_finished_spans
from runtime.scheduler.backends.dask_workers import DaskWorkers
from runtime.scheduler.backends.shards import ProgressTopics, ShardedJob
from runtime.scheduler.periodic import Periodic
from runtime.worker.key_names import ForgetKeyNames, forget_key_names
from runtime.worker.task import cancel_event_name, execute, execute_pack, task_key


class DaskBackend:
    """Submits jobs through a ``distributed.Client``."""

    name = "dask"

    def __init__(self, client: Any, device: str = "auto", shard_paths: int | None = None,
                 require_gpu: bool = False) -> None:
        self._client = client
        self._device = device
        self._require_gpu = require_gpu  # kernel jobs wait for a GPU worker even where only CPU workers run
        self._shard_paths = shard_paths  # jobs over this many paths run as shards (backends.shards)
        self._workers = DaskWorkers(client)
        self._lock = threading.Lock()
        self._running: dict[str, CancelSignal] = {}
        self._topics = ProgressTopics(client)  # sharded jobs' progress topics (backends/shards.py)
        # The Dask scheduler keeps finished spans and event topics forever unless told to forget them
        # (backends/dask_spans.py, backends/shards.py).
        self._span_pruner = Periodic("gpurt-dask-spans", self.forget_finished, PRUNE_PERIOD_S)
        self._span_pruner.start()
        # Each worker's memo of task-key prefixes grows by one entry per job (runtime/worker/key_names.py).
        client.register_plugin(ForgetKeyNames())

    def run(self, request: JobRequest, *, attempt: int) -> Execution:
        """Submit ``request`` and wait for it, at most ``request.timeout_s``."""
        return outcome_of_one(self.submit([(request, attempt)]))

    def run_pack(self, jobs: Sequence[Job]) -> list[Execution | Exception]:
        """Run tiny jobs ``(request, attempt)`` (``runtime.scheduler.packing``) in turn in one task; an outcome each."""
        return self.submit(jobs).wait()

    @property
    def client(self) -> Any:
        """The ``distributed.Client`` the jobs go through."""
        return self._client

    def submit(self, jobs: Sequence[Job], *, spill: tuple[str, str] | None = None) -> _TaskRun:
        """Hand ``jobs`` to the Dask scheduler now; the submission's ``wait`` gives an outcome per job.

        One job is one task, or its shards (``backends.shards``), which are submitted only when waited for:
        a sharded job spreads over the workers, and submitting it ahead would take them from the jobs before
        it. Several jobs (tiny ones, ``runtime.scheduler.packing``) run in turn in one task. An outcome is the job's
        ``Execution`` or its failure, exactly as ``run`` raises it: a job of a pack that fails fails alone.
        Each job keeps its own cancel event. A pack is waited for at most the sum of its jobs'
        ``timeout_s`` (they run one after another), and never longer than the longest job a request may ask
        for; past it, or if the task itself is lost, every job of the pack fails transiently. ``spill``: the
        events through which one unsharded job claims its start (``runtime.worker.task.claim_start``).
        """
        signals = [CancelSignal(self._client, cancel_event_name(request.job_id, attempt)) for request, attempt in jobs]
        resources = self._resources(jobs)
        first, attempt = jobs[0]
        run: _TaskRun
        if len(jobs) == 1:
            key = task_key(first.job_id, attempt, uuid.uuid4().hex[:8])
            shards = shard_count(first.type, first.params, self._shard_paths)
            if shards > 1:
                def sharded() -> Any:
                    return ShardedJob(self._client, first, shards, device=self._device, cancel=signals[0], key=key,
                                      resources=resources, topics=self._topics)
                run = _TaskRun(self, jobs, signals, sharded, first.timeout_s, in_flight=False)
            else:
                def task() -> Any:
                    return submit_sealed(self._client, execute, first.type, first.params, self._device,
                                         signals[0].name, spill, key=key, resources=resources)
                run = _TaskRun(self, jobs, signals, task, first.timeout_s)
        else:
            key = task_key(first.job_id, attempt, f"pack{len(jobs)}-{uuid.uuid4().hex[:8]}")
            work = [(request.type, request.params, signal.name)
                    for (request, _), signal in zip(jobs, signals, strict=True)]

            def pack() -> Any:
                return submit_sealed(self._client, execute_pack, work, self._device, key=key, resources=resources)
            # In turn, so the sum of their timeouts; but never longer than one job may take, which the leases
            # of the messages waiting behind this pack are sized for (runtime.scheduler.consumer.MAX_LEASE_S).
            run = _TaskRun(self, jobs, signals, pack, min(sum(r.timeout_s for r, _ in jobs), MAX_TIMEOUT_S))
        return run

    def _resources(self, jobs: Sequence[Job]) -> dict[str, int] | None:
        """What the task asks Dask for: a GPU for kernel jobs where there are GPU workers (or must be); the CPU
        worker's slot for jobs that need no GPU (``noop``), so a probe runs at once while the GPU pools are at
        zero; nothing on a cluster that advertises neither (the local platform without GPUs)."""
        if all(request.type is JobType.NOOP for request, _ in jobs) and \
                self._workers.advertises(contract.DASK_CPU_RESOURCE):
            return {contract.DASK_CPU_RESOURCE: 1}
        if self._require_gpu or self._workers.has_gpus():
            return {contract.DASK_GPU_RESOURCE: 1}
        return None

    def _track(self, jobs: Sequence[Job], signals: Sequence[CancelSignal]) -> None:
        with self._lock:
            for (request, _), signal in zip(jobs, signals, strict=True):
                self._running[request.job_id] = signal

    def _untrack(self, jobs: Sequence[Job]) -> None:
        with self._lock:
            for request, _ in jobs:
                self._running.pop(request.job_id, None)

    def cancel(self, job_id: str) -> bool:
        """Set the job's cancel event: a running task stops at its next checkpoint, a queued one at its first."""
        with self._lock:
            cancel_signal = self._running.get(job_id)
        if cancel_signal is not None:
            cancel_signal.set()
        return cancel_signal is not None

    def gpu_slots(self) -> int:
        """GPUs the workers advertise; without GPU workers, one slot per worker thread."""
        return self._workers.slots()

    def ready(self) -> bool:
        """Connected to the Dask scheduler."""
        return self._client.status == "running"

    def forget_finished(self) -> None:
        """What the Dask scheduler would otherwise keep of finished jobs: their spans, progress topics and
        task-key prefixes (runtime/worker/key_names.py)."""
        self.forget_finished_spans()
        self._topics.forget()
        self._client.run_on_scheduler(forget_key_names)

    def forget_finished_spans(self) -> int:
        """Ask the Dask scheduler to forget the spans of finished jobs; returns how many it dropped."""
        return int(self._client.run_on_scheduler(forget_finished_spans))

    def close(self, *, client: bool = True) -> None:
        """Stop the span pruner and close the client; ``client=False`` leaves open a client the caller shares
        with other backends (each backend's pruner is a thread of its own, polling until it is stopped)."""
        self._span_pruner.stop()
        if client:
            self._client.close()


class _TaskRun:
    """One Dask task (a job, or a pack of tiny jobs) or a sharded job: the ``Submission`` of ``DaskBackend``.

    ``start`` makes the future (a ``distributed.Future``, or a ``ShardedJob``): at once when ``in_flight``,
    else when waited for. The timeout counts from ``wait``: a job submitted ahead of its slot's running
    one starts on its worker when that one ends, which is about when the slot begins to wait for it.
    """

    def __init__(self, backend: DaskBackend, jobs: Sequence[Job], signals: Sequence[CancelSignal],
                 start: Callable[[], Any], timeout_s: float, *, in_flight: bool = True) -> None:
        self._backend = backend
        self._jobs = list(jobs)
        self._signals = list(signals)
        self._start = start
        self._timeout_s = timeout_s
        self._deadline: float | None = None  # set when the slot turns to these jobs (start_clock)
        self.in_flight = in_flight
        backend._track(self._jobs, self._signals)  # cancellable from now on, queued or not
        self._future: Any = None
        self._ended_at: datetime | None = None  # when Dask told the client the task ended
        self.started: list[datetime] = []
        if in_flight:
            try:
                self._future = start()
            except BaseException:
                backend._untrack(self._jobs)
                raise
            self._future.add_done_callback(self._mark_ended)

    def abandon(self) -> None:
        """Drop the task from the Dask scheduler (the job runs elsewhere now); ``wait`` then ends at once."""
        if self._future is not None:
            self._future.cancel()

    def _mark_ended(self, _future: Any) -> None:
        self._ended_at = self._ended_at or datetime.now(UTC)

    def done(self) -> bool:
        """Whether the task has ended (a run not yet submitted has not), or its time is up."""
        if self._deadline is not None and time.monotonic() >= self._deadline:
            return True
        return self._future is not None and self._future.done()

    def start_clock(self) -> float:
        """The timeout counts from the first call: when the slot turned to these jobs."""
        if self._deadline is None:
            self._deadline = time.monotonic() + self._timeout_s
        return self._deadline

    def add_done_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the task ends (Dask calls it from its own thread)."""
        if self._future is None:
            return  # submitted when waited for: the waiter is the one to know
        self._future.add_done_callback(lambda _future: callback())

    def wait(self) -> list[Execution | Exception]:
        """The jobs' outcomes; a task lost or dropped is every job's transient failure, one timed out ``_timed_out``."""
        from distributed import KilledWorker

        task_may_run_on = False
        outcomes: list[Any]
        waited_from = datetime.now(UTC)
        try:
            if self._future is None:
                self._future = self._start()
            value = self._future.result(timeout=max(0.0, self.start_clock() - time.monotonic()))
            outcomes = value if len(self._jobs) > 1 else [value]
        except TimeoutError:
            for signal in self._signals:
                signal.set()  # jobs still running stop at their next checkpoint; the events must outlive this call
            self._future.cancel()
            task_may_run_on = True
            outcomes = [_timed_out(len(self._jobs), self._timeout_s)] * len(self._jobs)
        except CancelledError:
            # Cancel requests go through the Event, never future.cancel(): a cancelled future means the
            # client lost the Dask scheduler (restart, network), which another delivery can survive.
            outcomes = [TransientJobError("the Dask scheduler dropped the task (connection lost)")] * len(self._jobs)
        except KilledWorker as exc:
            outcomes = [TransientJobError(f"Dask workers kept dying while running it: {exc}")] * len(self._jobs)
        except Exception as exc:  # the single job's own failure, raised through its future
            outcomes = [exc]
        finally:
            self._backend._untrack(self._jobs)
            if not task_may_run_on:
                for signal in self._signals:
                    signal.release()
        self.started = _starts(outcomes, waited_from, self._ended_at or datetime.now(UTC))
        # run_job raises ValueError for params it cannot accept: retrying cannot help.
        return [PermanentJobError(str(o)) if isinstance(o, ValueError) else o for o in outcomes]


def _timed_out(jobs: int, timeout_s: float) -> Exception:
    """The failure of a task that ran out of time: permanent for one job, transient for a pack.

    One job had its own ``timeout_s``, counted from when its slot turned to it: another delivery would run
    the same work against the same budget and time out alike, five times into the dead-letter queue (issue
    43: ``sleep_s`` 0.99 in ``timeout_s`` 1.0). A pack's budget is the sum of its jobs', and no job of it
    asked for it: each is worth another delivery, where it may run alone.
    """
    if jobs == 1:
        return PermanentJobError(f"timed out after {timeout_s:g} s, its timeout_s: another delivery would time out "
                                 f"alike; ask for a longer timeout_s")
    return TransientJobError(f"its pack timed out after {timeout_s:g} s")


def _starts(outcomes: Sequence[Any], waited_from: datetime, ended_at: datetime) -> list[datetime]:
    """When each job of a task started, estimated from the task's end: less the run times of the jobs from it
    on (a pack runs them in turn). A failed job's run time is unknown: it started no later than the caller
    began to wait (a job submitted ahead starts on its worker about when its slot turns to it)."""
    starts: list[datetime] = []
    at = ended_at
    for outcome in reversed(outcomes):
        at = min(at, waited_from) if isinstance(outcome, Exception) else at - timedelta(seconds=outcome.elapsed_s)
        starts.append(at)
    return starts[::-1]
