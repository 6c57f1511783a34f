"""A large job fanned out as shards over the Dask workers, and merged (``kernels.shards``) on one of them.

``ShardedJob`` submits one task per shard (``GPU: 1`` each where the workers have GPUs, so the shards
spread over every free device) and behaves like the single job's ``distributed.Future`` for
``DaskBackend.run``: ``result(timeout)`` waits for every shard and returns the merged ``JobOutput``;
``cancel()`` drops whatever has not finished. Per shard:

- cancel: every shard polls the job's one cancel event, so ``DaskBackend.cancel`` reaches all of them;
  a shard that fails for good (or is cancelled) sets it too, so the others stop instead of running on;
- CUDA out-of-memory: the kernel retries the chunk at half its size in place (``kernels.chunks``); a shard
  that still fails transiently (out of memory at one block, a CUDA launch timeout, a device error) is
  submitted again with half the chunk of its last attempt, up to ``SHARD_RETRIES`` times, while the
  others keep going;
- a timeout: once half the shards have finished, a shard running ``STRAGGLER_FACTOR`` times longer than
  the slowest of them (and at least ``STRAGGLER_MIN_S``) is a straggler - a sick device, a slow node - and
  a backup attempt with half the chunk starts on another worker; whichever attempt finishes first is
  kept (both compute the same blocks, so the same part) and the other is told to stop;
- a lost worker: Dask reruns only the tasks that were on it, i.e. only its shards;
- progress: each attempt reports its fraction (a Dask worker event, at most every
  ``runtime.worker.shards.PROGRESS_PERIOD_S``); ``progress()`` is the mean over shards of each shard's
  furthest attempt.

What a shard hands back is sealed (``runtime.worker.shards.SealedShard``): this process reads its run time,
never its part, and the merge runs as one more task on a worker, so the gpu-scheduler imports no kernel.

Each job's progress topic is forgotten after the job (``ProgressTopics``): Dask keeps a topic, with its
last events, in its scheduler for as long as that runs, and its client keeps a topic's handler (here the
whole job) after ``unsubscribe_topic``: without this, every sharded job would stay in both for good.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kernels.errors import TransientJobError
from kernels.jobs import JobOutput
from runtime.protocol.messages import JobRequest
from runtime.scheduler.backends.dask_cancel import CancelSignal
from runtime.scheduler.backends.dask_sealed import submit_sealed
from runtime.worker.shards import SealedShard, execute_shard, merge_shards

# Attempts of one shard after its first (after a transient failure, or as a straggler's backup): enough for
# a passing fault; a lasting one fails the job, and Pub/Sub redelivers it.
SHARD_RETRIES: Final = 2
# A straggler runs this many times longer than the slowest finished shard (all shards are the same size).
STRAGGLER_FACTOR: Final = 3.0
# ... and at least this long (seconds): below it, a backup's own start-up (a kernel warm-up) is not worth it.
STRAGGLER_MIN_S: Final = 30.0
# How often ``result`` looks for stragglers while it waits (seconds).
STRAGGLER_CHECK_S: Final = 1.0
# How long a failed job waits for its other shards to stop (seconds): they poll the cancel event every
# quarter second and stop between chunks (tens of milliseconds of work each).
STOP_WAIT_S: Final = 10.0
# A finished job's progress topic is forgotten this long after the job (seconds): well past STOP_WAIT_S,
# so the superseded attempts have stopped and their last event has arrived.
TOPIC_GRACE_S: Final = 60.0

log = logging.getLogger(__name__)


@dataclass
class _Attempt:
    """One submission of one shard. ``superseded`` tells it to stop when another attempt finished first."""

    index: int
    number: int  # 0 for the first; each later one launches half the chunk of the one before
    future: Any
    superseded: CancelSignal
    started: float | None = None  # when it first reported progress, i.e. began on a worker (monotonic)
    settled: bool = False  # its outcome was taken, or it was told to stop


def _late_event(event: object) -> None:
    """The handler of a finished job's topic until it is forgotten: a late progress event changes nothing."""


def drop_topics(dask_scheduler: Any, topics: list[str]) -> list[str]:
    """On the Dask scheduler: remove ``topics`` from its event broker; returns those still subscribed, kept.

    A topic is still subscribed when the client's unsubscribe, sent on another connection, has not been
    handled yet: the next round removes it.
    """
    known = dask_scheduler._broker._topics  # Dask has no API to remove a topic
    kept = [name for name in topics if name in known and known[name].subscribers]
    for name in topics:
        if name not in kept:
            known.pop(name, None)
    return kept


class ProgressTopics:
    """The progress topics of one client's sharded jobs: retired as each job ends, forgotten ``grace_s`` later."""

    def __init__(self, client: Any, grace_s: float = TOPIC_GRACE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._grace_s = grace_s
        self._clock = clock
        self._lock = threading.Lock()
        self._retired: dict[str, float] = {}  # topic -> when its job ended

    def retire(self, topic: str) -> None:
        """The job has ended: stop listening, let go of the job, remember to forget the topic."""
        self._client.unsubscribe_topic(topic)
        # Kept, not removed: the client answers an event of a topic it has no handler for with
        # unsubscribe_topic, which raises for such a topic; a late event may still be on its way.
        self._client._event_handlers[topic] = _late_event
        with self._lock:
            self._retired[topic] = self._clock()

    def forget(self) -> int:
        """Forget, in the client and on the Dask scheduler, the topics retired over ``grace_s`` ago."""
        cutoff = self._clock() - self._grace_s
        with self._lock:
            due = [topic for topic, ended in self._retired.items() if ended <= cutoff]
        if not due:
            return 0
        handlers = self._client._event_handlers
        for topic in due:
            if handlers.get(topic) is _late_event:  # not subscribed again meanwhile
                del handlers[topic]
        kept = set(self._client.run_on_scheduler(drop_topics, topics=due))
        with self._lock:  # only once the scheduler has dropped them: a failed round is tried again
            for topic in due:
                if topic not in kept:
                    self._retired.pop(topic, None)
        return len(due) - len(kept)

    def __len__(self) -> int:
        with self._lock:
            return len(self._retired)


class ShardedJob:
    """The shards of one delivery of a job, submitted at construction; waits and merges like a Future."""

    def __init__(self, client: Any, request: JobRequest, shards: int, *, device: str, cancel: CancelSignal,
                 key: str, resources: dict[str, int] | None, topics: ProgressTopics | None = None) -> None:
        self._client = client
        self._topics = topics if topics is not None else ProgressTopics(client)
        self._request = request
        self._shards = shards
        self._device = device
        self._cancel = cancel
        self._key = key
        self._resources = resources
        self._topic = f"{key}-progress"
        self._lock = threading.Lock()
        self._done: dict[int, float] = {}
        self._attempts: list[_Attempt] = []
        self._started = time.perf_counter()
        client.subscribe_topic(self._topic, self._on_progress)
        for index in range(shards):
            self._submit(index)

    def progress(self) -> float:
        """Fraction of the job done, 0..1: the mean of its shards' fractions."""
        return sum(self.shard_progress().values()) / self._shards

    def shard_progress(self) -> dict[int, float]:
        """The furthest fraction any attempt of each shard reported, by shard index (absent: none yet)."""
        with self._lock:
            return dict(self._done)

    def result(self, timeout: float | None = None) -> JobOutput:
        """Wait for every shard (at most ``timeout`` seconds in all) and merge; a shard's failure is the job's."""
        from distributed import wait

        deadline = None if timeout is None else time.monotonic() + timeout
        parts: dict[int, SealedShard] = {}
        try:
            while len(parts) < self._shards:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"the job's shards did not all finish within {timeout:.0f} s")
                live = {a.future: a for a in self._attempts if not a.settled}
                try:
                    done, _ = wait(list(live), timeout=STRAGGLER_CHECK_S if left is None
                                   else min(STRAGGLER_CHECK_S, left), return_when="FIRST_COMPLETED")
                except TimeoutError:
                    done = set()
                for future in done:
                    self._settle(live[future], parts)
                self._back_up_stragglers(parts)
        except TimeoutError:
            self.cancel()  # the backend sets the cancel event and keeps it for the running shards
            raise
        except BaseException:
            self._stop_all()
            raise
        finally:
            self._topics.retire(self._topic)
            self._retire_superseded()
        return self._merge([parts[i] for i in range(self._shards)], deadline)

    def _merge(self, parts: list[SealedShard], deadline: float | None) -> JobOutput:
        """Merge the shards' parts on a worker (which has the kernels), within what is left of the timeout."""
        merged = submit_sealed(self._client, merge_shards, self._request.type, self._request.params, parts,
                               time.perf_counter() - self._started, key=f"{self._key}-merge")
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            return merged.result(timeout=left)
        except TimeoutError:
            merged.cancel()
            raise

    def cancel(self) -> None:
        """Drop every shard task not yet finished (the cancel event stops running ones cooperatively)."""
        for attempt in self._attempts:
            if not attempt.future.done():
                attempt.future.cancel()

    def _settle(self, attempt: _Attempt, parts: dict[int, SealedShard]) -> None:
        """Take the outcome of a finished attempt: its part, a new attempt, or the job's failure."""
        attempt.settled = True
        index, future = attempt.index, attempt.future
        if future.status == "finished":
            parts[index] = future.result()
            for other in self._live(index):  # a straggler, or its backup: the same blocks, no longer needed
                other.settled = True
                other.superseded.set()
            return
        if self._live(index):
            return  # another attempt of this shard is still running and may yet succeed
        if isinstance(future.exception(), TransientJobError) and self._retries_left(index):
            log.warning("shard %d of %s failed transiently (%s); running it again with smaller chunks", index,
                        self._request.job_id, future.exception())
            self._submit(index)
            return
        future.result()  # raises the shard's error, which ends the job

    def _back_up_stragglers(self, parts: dict[int, SealedShard]) -> None:
        """Start a backup attempt of every shard that runs far longer than its finished siblings did."""
        if not parts or 2 * len(parts) < self._shards:
            return
        limit = max(STRAGGLER_MIN_S, STRAGGLER_FACTOR * max(out.elapsed_s for out in parts.values()))
        now = time.monotonic()
        with self._lock:
            stragglers = [a for a in self._attempts if not a.settled and a.index not in parts
                          and a.started is not None and now - a.started > limit]
        for attempt in stragglers:
            if len(self._live(attempt.index)) == 1 and self._retries_left(attempt.index):
                log.warning("shard %d of %s has run %.0f s, over %.0f s: starting a backup attempt", attempt.index,
                            self._request.job_id, now - (attempt.started or now), limit)
                self._submit(attempt.index)

    def _retire_superseded(self) -> None:
        """Once the attempts told to stop have stopped (boundedly), drop their tasks and delete their events.

        In the background, so the job's result does not wait: an attempt sees its event within a quarter
        second plus one chunk, and deleting the event before that would leave it running to its end.
        """
        from distributed import wait

        told = [a for a in self._attempts if a.superseded.is_set]
        if not told:
            return

        def retire() -> None:
            with contextlib.suppress(TimeoutError):
                wait([a.future for a in told], timeout=STOP_WAIT_S)
            for attempt in told:
                attempt.future.cancel()
                attempt.superseded.release()

        threading.Thread(target=retire, name=f"{self._key}-retire", daemon=True).start()

    def _live(self, index: int) -> list[_Attempt]:
        return [a for a in self._attempts if a.index == index and not a.settled]

    def _tried(self, index: int) -> int:
        """How many attempts of shard ``index`` were submitted so far."""
        return sum(a.index == index for a in self._attempts)

    def _retries_left(self, index: int) -> bool:
        return self._tried(index) <= SHARD_RETRIES

    def _stop_all(self) -> None:
        """One shard failed: stop the others at their next checkpoint and wait (boundedly) until they have.

        Waiting matters: the backend clears the cancel event once ``result`` returns, and a shard that had
        not yet looked at it would then run to its end for nothing.
        """
        from distributed import wait

        self._cancel.set()
        running = [a.future for a in self._attempts if not a.future.done()]
        # a shard still inside one chunk after that: dropping its task below is all that is left to do
        with contextlib.suppress(TimeoutError):
            wait(running, timeout=STOP_WAIT_S)
        self.cancel()

    def _submit(self, index: int) -> None:
        """Submit the shard's next attempt: numbered after every earlier one, so its Dask key is new."""
        number = self._tried(index)
        name = f"{self._key}-shard{index}-{number}"
        superseded = CancelSignal(self._client, f"{name}-superseded")
        future = submit_sealed(
            self._client, execute_shard, self._request.type, self._request.params, index, self._shards,
            self._device, [self._cancel.name, superseded.name], self._topic, number, key=name,
            resources=self._resources)
        with self._lock:
            self._attempts.append(_Attempt(index, number, future, superseded))

    def _on_progress(self, event: tuple[float, dict[str, Any]]) -> None:
        _, body = event
        index, number, done = int(body["shard"]), int(body["attempt"]), float(body["done"])
        with self._lock:
            self._done[index] = max(self._done.get(index, 0.0), done)
            for attempt in self._attempts:
                if (attempt.index, attempt.number) == (index, number) and attempt.started is None:
                    attempt.started = time.monotonic()
