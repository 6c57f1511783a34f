"""Run jobs on a Dask cluster: the DaskCluster's scheduler in the cloud, a LocalCluster on one machine.

A job is one task (``worker_task.execute``) submitted with ``pure=False`` (the same job id may run
again after a redelivery) and ``resources={"GPU": 1}`` when the cluster has GPU workers, so Dask
places at most one job per GPU. A job over ``shard_paths`` paths runs as shards, one task each
(``backends.shards``). A worker that dies mid-task is handled by Dask itself: the scheduler
reschedules the task on another worker (up to ``distributed.scheduler.allowed-failures``). Task-level
``retries`` stay off on purpose: they would re-run permanent failures and cancellations too; every
other retry is Pub/Sub's redelivery.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from concurrent.futures import CancelledError
from typing import Any

from kernels.errors import JobCancelled, PermanentJobError, TransientJobError
from kernels.shards import shard_count
from protocol import contract
from protocol.messages import MAX_TIMEOUT_S, JobRequest
from scheduler.backends.base import Execution
from scheduler.backends.dask_cancel import CancelSignal
from scheduler.backends.dask_spans import PRUNE_PERIOD_S, forget_finished_spans
from scheduler.backends.dask_workers import DaskWorkers
from scheduler.backends.shards import ProgressTopics, ShardedJob
from scheduler.periodic import Periodic
from worker.key_names import ForgetKeyNames, forget_key_names
from worker.task import cancel_event_name, execute, execute_pack, task_key


class DaskBackend:
    """Submits jobs through a ``distributed.Client``."""

    name = "dask"

    def __init__(self, client: Any, device: str = "auto", shard_paths: int | None = None) -> None:
        self._client = client
        self._device = device
        self._shard_paths = shard_paths  # jobs over this many paths run as shards (backends.shards)
        self._workers = DaskWorkers(client)
        self._lock = threading.Lock()
        self._running: dict[str, CancelSignal] = {}
        self._topics = ProgressTopics(client)  # sharded jobs' progress topics (backends/shards.py)
        # The Dask scheduler keeps finished spans and event topics forever unless told to forget them
        # (backends/dask_spans.py, backends/shards.py).
        self._span_pruner = Periodic("gpurt-dask-spans", self.forget_finished, PRUNE_PERIOD_S)
        self._span_pruner.start()
        # Each worker's memo of task-key prefixes grows by one entry per job (worker/key_names.py).
        client.register_plugin(ForgetKeyNames())

    def run(self, request: JobRequest, *, attempt: int) -> Execution:
        """Submit ``request`` and wait for it, at most ``request.timeout_s``."""
        from distributed import KilledWorker

        job_id = request.job_id
        cancel = CancelSignal(self._client, cancel_event_name(job_id, attempt))
        resources = {contract.DASK_GPU_RESOURCE: 1} if self._workers.has_gpus() else None
        key = task_key(job_id, attempt, uuid.uuid4().hex[:8])
        shards = shard_count(request.type, request.params, self._shard_paths)
        future: Any
        if shards > 1:
            future = ShardedJob(self._client, request, shards, device=self._device, cancel=cancel, key=key,
                                resources=resources, topics=self._topics)
        else:
            future = self._client.submit(execute, request.type, request.params, self._device, cancel.name,
                                         key=key, pure=False, resources=resources)
        with self._lock:
            self._running[job_id] = cancel
        task_may_run_on = False
        try:
            output = future.result(timeout=request.timeout_s)
        except TimeoutError:
            cancel.set()  # the task stops at its next checkpoint; the event must outlive this call
            future.cancel()
            task_may_run_on = True
            raise TransientJobError(f"timed out after {request.timeout_s:g} s") from None
        except CancelledError:
            # Cancel requests go through the Event, never future.cancel(): a cancelled future means the
            # client lost the Dask scheduler (restart, network), which another delivery can survive.
            raise TransientJobError("the Dask scheduler dropped the task (connection lost)") from None
        except KilledWorker as exc:
            raise TransientJobError(f"Dask workers kept dying while running it: {exc}") from None
        except (JobCancelled, PermanentJobError, TransientJobError):
            raise
        except ValueError as exc:
            # run_job raises ValueError for params it cannot accept: retrying cannot help.
            raise PermanentJobError(str(exc)) from None
        finally:
            with self._lock:
                self._running.pop(job_id, None)
            if not task_may_run_on:
                cancel.release()
        return output

    def run_pack(self, jobs: Sequence[tuple[JobRequest, int]]) -> list[Execution | Exception]:
        """Run tiny jobs ``(request, attempt)`` (``scheduler.packing``) in turn in one task; an outcome each.

        An outcome is the job's ``Execution`` or its failure, exactly as ``run`` would have raised it: a job
        that fails fails alone. Each job keeps its own cancel event. The pack is waited for at most the sum
        of its jobs' ``timeout_s`` (they run one after another), and never longer than the longest job a
        request may ask for; past it, or if the task itself is lost, every job of the pack fails transiently.
        """
        from distributed import KilledWorker

        signals = [CancelSignal(self._client, cancel_event_name(request.job_id, attempt)) for request, attempt in jobs]
        resources = {contract.DASK_GPU_RESOURCE: 1} if self._workers.has_gpus() else None
        first, attempt = jobs[0]
        key = task_key(first.job_id, attempt, f"pack{len(jobs)}-{uuid.uuid4().hex[:8]}")
        work = [(request.type, request.params, signal.name) for (request, _), signal in zip(jobs, signals, strict=True)]
        future = self._client.submit(execute_pack, work, self._device, key=key, pure=False, resources=resources)
        with self._lock:
            for (request, _), signal in zip(jobs, signals, strict=True):
                self._running[request.job_id] = signal
        # In turn, so the sum of their timeouts; but never longer than one job may take, which the leases
        # of the messages waiting behind this pack are sized for (scheduler.consumer.MAX_LEASE_S).
        timeout_s = min(sum(request.timeout_s for request, _ in jobs), MAX_TIMEOUT_S)
        task_may_run_on = False
        outcomes: list[Any]
        try:
            outcomes = future.result(timeout=timeout_s)
        except TimeoutError:
            for signal in signals:
                signal.set()  # the jobs left stop at their first checkpoint; the events must outlive this call
            future.cancel()
            task_may_run_on = True
            outcomes = [TransientJobError(f"its pack timed out after {timeout_s:g} s")] * len(jobs)
        except CancelledError:
            outcomes = [TransientJobError("the Dask scheduler dropped the task (connection lost)")] * len(jobs)
        except KilledWorker as exc:
            outcomes = [TransientJobError(f"Dask workers kept dying while running it: {exc}")] * len(jobs)
        finally:
            with self._lock:
                for request, _ in jobs:
                    self._running.pop(request.job_id, None)
            if not task_may_run_on:
                for signal in signals:
                    signal.release()
        # run_job raises ValueError for params it cannot accept: retrying cannot help.
        return [PermanentJobError(str(o)) if isinstance(o, ValueError) else o for o in outcomes]

    def cancel(self, job_id: str) -> bool:
        """Set the job's cancel event: a running task stops at its next checkpoint, a queued one at its first."""
        with self._lock:
            cancel_signal = self._running.get(job_id)
        if cancel_signal is not None:
            cancel_signal.set()
        return cancel_signal is not None

    def gpu_slots(self) -> int:
        """GPUs the workers advertise; without GPU workers, one slot per worker thread."""
        workers = self._workers.read()
        gpus = sum(int(w.get("resources", {}).get(contract.DASK_GPU_RESOURCE, 0)) for w in workers)
        return gpus if gpus else sum(int(w.get("nthreads", 1)) for w in workers)

    def ready(self) -> bool:
        """Connected to the Dask scheduler."""
        return self._client.status == "running"

    def forget_finished(self) -> None:
        """What the Dask scheduler would otherwise keep of finished jobs: their spans, progress topics and
        task-key prefixes (worker/key_names.py)."""
        self.forget_finished_spans()
        self._topics.forget()
        self._client.run_on_scheduler(forget_key_names)

    def forget_finished_spans(self) -> int:
        """Ask the Dask scheduler to forget the spans of finished jobs; returns how many it dropped."""
        return int(self._client.run_on_scheduler(forget_finished_spans))

    def close(self) -> None:
        """Stop the span pruner, close the client."""
        self._span_pruner.stop()
        self._client.close()
