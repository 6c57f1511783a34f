"""Test harness: a real emulator, the real scheduler service (LocalCluster, HTTP on loopback), a result listener.

Subscriptions get a 1 s retry backoff instead of the contract's 10 s so five deliveries take seconds;
everything else (dead-letter policy, attempts) is the contract's.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx

from kernels.errors import TransientJobError
from runtime.protocol import contract
from runtime.protocol.messages import JobRequest, JobResult
from runtime.protocol.queues import DEFAULT_QUEUE, QueueSpec, topology, with_built_ins
from runtime.pubsub.admin import ensure_topology, subscription_path
from runtime.pubsub.clients import publisher_client, subscriber_client
from runtime.pubsub.publisher import TopicPublisher
from runtime.scheduler.backends.base import Execution, ExecutionBackend, Submission, submission
from runtime.scheduler.backends.dask import DaskBackend
from tests.runtime.local.prometheus.polling import poll

FAST_RETRY_S = 1
# The request queues of the package's platform (conftest.py): two desks of equal weight, one capped at one slot,
# besides the built-in default and urgent queues. A harness of its own consumes the built-in ones only.
TEST_QUEUES = with_built_ins([QueueSpec("desk-a"), QueueSpec("desk-b", max_slots=1)])
TEST_TOPICS, _SUBSCRIPTIONS = topology(TEST_QUEUES)
TEST_SUBSCRIPTIONS = tuple(
    dataclasses.replace(spec, retry_min_backoff_s=FAST_RETRY_S, retry_max_backoff_s=FAST_RETRY_S)
    if spec.retry_min_backoff_s is not None else spec
    for spec in _SUBSCRIPTIONS
)


class DaskBackends:
    """The ``DaskBackend``s a test module makes on its one cluster, all closed at the module's end: a backend's
    clean-up round runs on a thread until the backend is closed, and one left running outlives the cluster."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._made: list[DaskBackend] = []

    def make(self, **options: Any) -> DaskBackend:
        """A backend on the module's cluster (``DaskBackend``'s keyword options)."""
        backend = DaskBackend(self._client, **options)
        self._made.append(backend)
        return backend

    def close(self) -> None:
        """Close every backend made (each closes the shared client too, which is idempotent)."""
        for backend in self._made:
            backend.close()


class ListSink:
    """A result sink that keeps what is published, in order, and counts the Publish calls."""

    def __init__(self) -> None:
        self.published: list[JobResult] = []
        self.calls = 0  # Publish RPCs

    def publish_result(self, result: JobResult) -> str:
        return self.publish_results([result])[0]

    def publish_results(self, results: list[JobResult]) -> list[str]:
        self.calls += 1
        self.published.extend(results)
        return [str(len(self.published) - len(results) + i) for i in range(len(results))]


class IdleBackend:
    """The parts of an execution backend a fake runs no differently: nothing to cancel, one slot, ready."""

    def cancel(self, job_id: str) -> bool:
        return False

    def gpu_slots(self) -> int:
        return 1

    def ready(self) -> bool:
        return True

    def close(self) -> None:
        return None


def wait_for(condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll ``condition`` until truthy; fail the test with ``what`` after ``timeout_s``.

    Asked more often than the shared default: these conditions are in-process reads, and the tests wait on many.
    """
    return poll(condition, timeout_s, what, interval_s=0.05)


class ResultListener:
    """Collects every JobResult published on the result topic (streaming pull on gpu-job-result-sub)."""

    def __init__(self, emulator_host: str, project: str) -> None:
        self._lock = threading.Lock()
        self.results: dict[str, list[JobResult]] = defaultdict(list)
        self._subscriber = subscriber_client(emulator_host)
        self._future = self._subscriber.subscribe(
            subscription_path(project, contract.RESULT_SUBSCRIPTION), callback=self._on_message)

    def _on_message(self, message: Any) -> None:
        result = JobResult.model_validate_json(message.data)
        with self._lock:
            self.results[result.job_id].append(result)
        message.ack()

    def of(self, job_id: str) -> list[JobResult]:
        """Results seen for ``job_id`` so far."""
        with self._lock:
            return list(self.results.get(job_id, []))

    def wait(self, job_id: str, timeout_s: float = 30.0) -> JobResult:
        """The first result of ``job_id``."""
        return wait_for(lambda: (self.of(job_id) or [None])[0], timeout_s, f"a result for {job_id}")

    def close(self) -> None:
        """Stop listening."""
        self._future.cancel()
        self._future.result(timeout=10)
        self._subscriber.close()


class Requests:
    """Publishes requests to the platform under test."""

    def __init__(self, emulator_host: str, project: str) -> None:
        self._client = publisher_client(emulator_host)
        self._topics = TopicPublisher(self._client, project)

    def job(self, job_id: str, job_type: str = "noop", *, queue: str = DEFAULT_QUEUE, **params: Any) -> str:
        """Publish a valid request on ``queue``'s topic."""
        request = JobRequest.model_validate({"job_id": job_id, "type": job_type, "params": params})
        return self._topics.publish_request(request, queue=queue)

    def raw(self, body: bytes | dict, *, queue: str = DEFAULT_QUEUE, **attributes: str) -> str:
        """Publish bytes (or a dict as JSON) exactly as given, on ``queue``'s topic."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self._topics.publish_raw_request(data, attributes, queue=queue)

    def close(self) -> None:
        """Flush and close."""
        self._client.stop()


def create_topology(emulator_host: str, project: str) -> None:
    """The contract's topics and (fast-retry) subscriptions in ``project``, with those of ``TEST_QUEUES``."""
    publisher, subscriber = publisher_client(emulator_host), subscriber_client(emulator_host)
    try:
        ensure_topology(project, publisher, subscriber, topics=TEST_TOPICS, subscriptions=TEST_SUBSCRIPTIONS)
    finally:
        subscriber.close()


# The longest a held job keeps its slot, should a test forget to release it (seconds).
HOLD_MAX_S = 60.0


class ScriptedBackend:
    """Wraps the real backend at its seam: counts runs per job, fails chosen attempts transiently."""

    def __init__(self, inner: ExecutionBackend) -> None:
        self._inner = inner
        self.name = inner.name
        self._lock = threading.Lock()
        self.runs: dict[str, list[int]] = defaultdict(list)
        self.fail_attempts: dict[str, set[int]] = {}
        self.packs: list[list[str]] = []  # the job ids of each pack, as submitted
        # Jobs whose submission waits until their event is set: each holds its slot (a backlog that is load).
        self.held: dict[str, threading.Event] = {}

    def run(self, request: JobRequest, *, attempt: int) -> Execution:
        """``submit`` one job and wait for it."""
        outcome = self.submit([(request, attempt)]).wait()[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def run_pack(self, jobs: list[tuple[JobRequest, int]]) -> list[Execution | Exception]:
        """``submit`` a pack and wait for it (its presence says this backend packs)."""
        return self.submit(jobs).wait()

    def submit(self, jobs: Sequence[tuple[JobRequest, int]]) -> Submission:
        """Record the jobs (and a pack); scripted failures fail alone; the others are submitted for real, a held
        one once it is released."""
        failures: dict[int, Exception] = {}
        real: list[int] = []
        with self._lock:
            if len(jobs) > 1:
                self.packs.append([request.job_id for request, _ in jobs])
            for index, (request, attempt) in enumerate(jobs):
                self.runs[request.job_id].append(attempt)
                if attempt in self.fail_attempts.get(request.job_id, set()):
                    failures[index] = TransientJobError(f"scripted transient failure at attempt {attempt}")
                else:
                    real.append(index)
        for request, _ in jobs:
            hold = self.held.get(request.job_id)
            if hold is not None:
                hold.wait(HOLD_MAX_S)
        inner = submission(self._inner, [jobs[index] for index in real]) if real else None
        return _ScriptedSubmission(len(jobs), failures, real, inner)

    def cancel(self, job_id: str) -> bool:
        """Pass through."""
        return self._inner.cancel(job_id)

    def gpu_slots(self) -> int:
        """Pass through."""
        return self._inner.gpu_slots()

    def ready(self) -> bool:
        """Pass through."""
        return self._inner.ready()

    def close(self) -> None:
        """Pass through."""
        self._inner.close()


class _ScriptedSubmission:
    """The real submission of a ``ScriptedBackend``'s unscripted jobs, with the scripted failures put back."""

    def __init__(self, jobs: int, failures: dict[int, Exception], real: list[int], inner: Submission | None) -> None:
        self._jobs = jobs
        self._failures = failures
        self._real = real
        self._inner = inner
        self.in_flight = inner is not None and inner.in_flight
        self.started: list[datetime] = []

    def done(self) -> bool:
        """Done when the real jobs are (or there are none)."""
        return self._inner is None or self._inner.done()

    def start_clock(self) -> float:
        """The real jobs' deadline (none without them)."""
        return self._inner.start_clock() if self._inner is not None else math.inf

    def add_done_callback(self, callback: Callable[[], None]) -> None:
        """The real jobs' callback, or at once."""
        if self._inner is None:
            callback()
        else:
            self._inner.add_done_callback(callback)

    def wait(self) -> list[Execution | Exception]:
        """Every job's outcome in order: a scripted failure or the real one."""
        outcomes: list[Execution | Exception] = [self._failures.get(i, TransientJobError("unset"))
                                                 for i in range(self._jobs)]
        now = datetime.now(UTC)
        self.started = [now] * self._jobs
        if self._inner is not None:
            for index, outcome, began in zip(self._real, self._inner.wait(), self._inner.started, strict=True):
                outcomes[index] = outcome
                self.started[index] = began
        return outcomes


class Api:
    """HTTP client for the service under test."""

    def __init__(self, base_url: str, token: str | None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=30)
        self.anonymous = httpx.Client(base_url=base_url, timeout=30)
