"""Every result message of a load, per job id, with the moment it arrived: lost, duplicated, failed.

The ledger reads the result topic through its own temporary subscription (the client's
``ResultCollector``), so it sees every result message, duplicates included, whoever else consumes
``gpu-job-result-sub``. Unlike the other drills' ``ResultTap`` (pulled by the drill's own thread), it
collects on the subscriber's thread while the drill is busy injecting faults, and keeps arrival times.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from runtime.access.transport import PubSubClients, ResultCollector
from runtime.protocol.messages import JobResult, JobStatus


@dataclass(frozen=True)
class Arrival:
    """One result message and when (``time.monotonic()``) the ledger received it."""

    at: float
    result: JobResult


@dataclass(frozen=True)
class Tally:
    """Per-job accounting of a load against the statuses its jobs should end in."""

    jobs: int
    lost: list[str]  # no result at all
    duplicated: int  # jobs with more than one result message
    differing: list[str]  # ... whose messages do not all say the same
    unexpected: dict[str, str]  # job -> status, where it is not the planned one (failed, rejected, ...)
    by_status: dict[str, int]  # first result's status -> jobs


class ResultLedger:
    """Collects the results of ``job_ids`` (use as a context manager around the publishes)."""

    def __init__(self, clients: PubSubClients, job_ids: Collection[str]) -> None:
        self._watched = frozenset(job_ids)
        self._lock = threading.Lock()
        self._arrivals: dict[str, list[Arrival]] = defaultdict(list)
        self._collector = ResultCollector(clients, on_any=self._on_result)

    def __enter__(self) -> ResultLedger:
        self._collector.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._collector.__exit__(*exc)

    def _on_result(self, result: JobResult) -> None:  # the subscriber's thread
        if result.job_id in self._watched:
            with self._lock:
                self._arrivals[result.job_id].append(Arrival(time.monotonic(), result))

    def done(self) -> int:
        """Watched jobs with at least one result."""
        with self._lock:
            return len(self._arrivals)

    def first_at(self, job_id: str) -> float | None:
        """When the first result of ``job_id`` arrived, or None."""
        with self._lock:
            found = self._arrivals.get(job_id)
            return found[0].at if found else None

    def wait_for(self, count: int, stall_s: float, on_tick: Callable[[int], None] | None = None) -> bool:
        """Wait until ``count`` watched jobs have a result; give up once ``stall_s`` pass without a new one.

        No overall deadline: a load of 10,000 jobs takes minutes, and progress is what matters.
        """
        wanted = count
        last_change = time.monotonic()
        last = -1
        while (count := self.done()) < wanted:
            now = time.monotonic()
            if count != last:
                last, last_change = count, now
            if now - last_change > stall_s:
                return False
            if on_tick is not None:
                on_tick(count)
            time.sleep(0.2)
        return True

    def tally(self, planned: Mapping[str, JobStatus]) -> Tally:
        """Count the load against ``planned`` (job id -> the status it should end in)."""
        with self._lock:
            arrivals = {job: list(found) for job, found in self._arrivals.items()}
        by_status: dict[str, int] = defaultdict(int)
        unexpected = {}
        duplicated, differing = 0, []
        for job, found in arrivals.items():
            first = found[0].result
            by_status[first.status.value] += 1
            if first.status is not planned.get(job):
                unexpected[job] = first.status.value
            if len(found) > 1:
                duplicated += 1
                # The same answer to another message of the job names that message (JobResult.request_message_id).
                if any(a.result.model_copy(update={"request_message_id": first.request_message_id}) != first
                       for a in found[1:]):
                    differing.append(job)
        return Tally(jobs=len(planned), lost=sorted(set(planned) - arrivals.keys()), duplicated=duplicated,
                     differing=sorted(differing), unexpected=unexpected, by_status=dict(by_status))
