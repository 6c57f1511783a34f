"""A large job fanned out as shards over the Dask workers, and merged (``kernels.shards``).

``ShardedJob`` submits one task per shard (``GPU: 1`` each where the workers have GPUs, so the shards
spread over every free device) and behaves like the single job's ``distributed.Future`` for
``DaskBackend.run``: ``result(timeout)`` waits for every shard and returns the merged ``JobOutput``;
``cancel()`` drops whatever has not finished. Per shard:

- cancel: every shard polls the job's one cancel event, so ``DaskBackend.cancel`` reaches all of them;
  a shard that fails for good (or is cancelled) sets it too, so the others stop instead of running on;
- CUDA out-of-memory: the kernel retries the chunk at half its size in place (``kernels.chunks``); a shard
  that still fails transiently is submitted again, up to ``SHARD_RETRIES`` times, the others keep going;
- a lost worker: Dask reruns only the tasks that were on it, i.e. only its shards;
- progress: each shard reports its fraction (a Dask worker event, at most every ``PROGRESS_PERIOD_S``);
  ``progress()`` is the shards' mean, each shard being an equal share of the job's blocks.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import replace
from typing import Any, Final

from kernels.errors import TransientJobError
from kernels.jobs import JobOutput
from kernels.shards import ShardOutput, merge, run_shard
from protocol.messages import JobRequest
from protocol.params import JobParams
from runtime.scheduler.backends.dask_cancel import CancelSignal
from runtime.scheduler.backends.worker_task import stop_poller

# Submissions of one shard after its first that failed transiently (out of memory even at one block,
# a device error): enough for a passing fault; a lasting one fails the job, and Pub/Sub redelivers it.
SHARD_RETRIES: Final = 2
# How often a shard reports its progress (seconds): each report is one message to the Dask scheduler.
PROGRESS_PERIOD_S: Final = 1.0
# How long a failed job waits for its other shards to stop (seconds): they poll the cancel event every
# quarter second and stop between chunks (tens of milliseconds of work each).
STOP_WAIT_S: Final = 10.0


def execute_shard(job_type: str, params: JobParams, index: int, shards: int, device: str, event_name: str,
                  topic: str) -> ShardOutput:
    """Run shard ``index`` of ``shards`` on this worker; progress goes to the Dask event ``topic``."""
    from distributed import get_worker

    worker = get_worker()
    last = 0.0

    def progress(fraction: float) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= PROGRESS_PERIOD_S or fraction >= 1.0:
            last = now
            worker.log_event(topic, {"shard": index, "done": fraction})

    out = run_shard(job_type, params, index, shards, device=device, should_stop=stop_poller(event_name),
                    progress=progress)
    return replace(out, worker=worker.address)


class ShardedJob:
    """The shards of one delivery of a job, submitted at construction; waits and merges like a Future."""

    def __init__(self, client: Any, request: JobRequest, shards: int, *, device: str, cancel: CancelSignal,
                 key: str, resources: dict[str, int] | None) -> None:
        self._client = client
        self._request = request
        self._shards = shards
        self._device = device
        self._cancel = cancel
        self._key = key
        self._resources = resources
        self._topic = f"{key}-progress"
        self._lock = threading.Lock()
        self._done: dict[int, float] = {}
        self._started = time.perf_counter()
        client.subscribe_topic(self._topic, self._on_progress)
        self._futures = {self._submit(i, 0): i for i in range(shards)}

    def progress(self) -> float:
        """Fraction of the job done, 0..1: the mean of its shards' fractions."""
        return sum(self.shard_progress().values()) / self._shards

    def shard_progress(self) -> dict[int, float]:
        """The last fraction each shard reported, by shard index (shards yet to report are absent)."""
        with self._lock:
            return dict(self._done)

    def result(self, timeout: float | None = None) -> JobOutput:
        """Wait for every shard (at most ``timeout`` seconds in all) and merge; a shard's failure is the job's."""
        from distributed import as_completed

        outputs: list[ShardOutput] = []
        tries = dict.fromkeys(range(self._shards), 0)
        try:
            pending = as_completed(list(self._futures), timeout=timeout, raise_errors=False)
            for future in pending:
                index = self._futures[future]
                if future.status == "error" and isinstance(future.exception(), TransientJobError) \
                        and tries[index] < SHARD_RETRIES:
                    tries[index] += 1
                    retry = self._submit(index, tries[index])
                    self._futures[retry] = index
                    pending.add(retry)
                    continue
                outputs.append(future.result())  # raises the shard's error, which ends the job
        except TimeoutError:
            self.cancel()  # the backend sets the cancel event and keeps it for the running shards
            raise
        except BaseException:
            self._stop_all()
            raise
        finally:
            self._client.unsubscribe_topic(self._topic)
        return merge(self._request.type.value, self._request.params, outputs,
                     elapsed_s=time.perf_counter() - self._started)

    def cancel(self) -> None:
        """Drop every shard task not yet finished (the cancel event stops running ones cooperatively)."""
        for future in self._futures:
            if not future.done():
                future.cancel()

    def _stop_all(self) -> None:
        """One shard failed: stop the others at their next checkpoint and wait (boundedly) until they have.

        Waiting matters: the backend clears the cancel event once ``result`` returns, and a shard that had
        not yet looked at it would then run to its end for nothing.
        """
        from distributed import wait

        self._cancel.set()
        running = [future for future in self._futures if not future.done()]
        # a shard still inside one chunk after that: dropping its task below is all that is left to do
        with contextlib.suppress(TimeoutError):
            wait(running, timeout=STOP_WAIT_S)
        self.cancel()

    def _submit(self, index: int, attempt: int) -> Any:
        from distributed import Future

        future: Future = self._client.submit(
            execute_shard, self._request.type.value, self._request.params, index, self._shards, self._device,
            self._cancel.name, self._topic, key=f"{self._key}-shard{index}-{attempt}", pure=False,
            resources=self._resources)
        return future

    def _on_progress(self, event: tuple[float, dict[str, Any]]) -> None:
        _, body = event
        with self._lock:
            self._done[int(body["shard"])] = float(body["done"])
