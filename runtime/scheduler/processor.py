"""What happens to one delivery of a job request (docs/architecture.md, failure semantics), independent of Pub/Sub.

The consumer hands in a ``Delivery`` and applies the returned ``Decision`` (ack or nack). Ordering
is what makes it lossless: artifacts, then the result in the store, then the publish, then the
``published`` marker - and only then the ack. A crash anywhere before the ack leaves the message to
be redelivered, and the redelivery finds the stored result instead of recomputing it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Final

from kernels.errors import JobCancelled, PermanentJobError
from kernels.params import JobType
from kernels.version import KERNEL_VERSION
from runtime.protocol import contract
from runtime.protocol.messages import (
    ErrorKind,
    InvalidRequest,
    JobError,
    JobRequest,
    JobResult,
    JobStatus,
    is_job_id,
)
from runtime.pubsub.publisher import ResultSink
from runtime.scheduler.backends.base import Execution, ExecutionBackend, PackingBackend, Submission, submission
from runtime.scheduler.metrics import SchedulerMetrics
from runtime.scheduler.outcome import conflict_result, ended_result, publishable, succeeded_result
from runtime.scheduler.records import Conclusion, Decision, Delivery, InFlight, Settle, Started
from runtime.scheduler.registry import JobRegistry
from runtime.scheduler.result_cache import answers, cached_answer, request_key, result_key
from runtime.scheduler.store import ResultStore

# How long a second delivery of a job that is running here waits for the first to end before it is
# handed back to Pub/Sub; a job's own timeout bounds the wait in practice.
DUPLICATE_WAIT_MARGIN_S: Final = 30.0
_KNOWN_TYPES: Final = frozenset(t.value for t in JobType)
# A delivery's outcome as ``start`` collects it: decided, or the wait of a twin of a job running here.
_Part = Decision | Conclusion | Callable[[], Decision | Conclusion]

log = logging.getLogger(__name__)


class Processor:
    """Turns deliveries into results: validate, deduplicate, run, store, publish, decide ack/nack."""

    def __init__(self, backend: ExecutionBackend, store: ResultStore, sink: ResultSink, registry: JobRegistry,
                 metrics: SchedulerMetrics, max_attempts: int = contract.MAX_DELIVERY_ATTEMPTS,
                 kernel_version: str = KERNEL_VERSION) -> None:
        self._backend = backend
        self._store = store
        self._sink = sink
        self._registry = registry
        self._metrics = metrics
        self._max_attempts = max_attempts
        self._kernel_version = kernel_version  # the result cache's key part (tests pass another to see it miss)

    @property
    def packs(self) -> bool:
        """Whether the backend runs packs of tiny jobs (``receive_pack``)."""
        return isinstance(self._backend, PackingBackend)

    def process(self, delivery: Delivery) -> Decision:
        """Handle one delivery to its end, result published; never raises (a store or broker failure is a nack)."""
        outcome = self.receive(delivery)
        return self.finish([outcome])[0] if isinstance(outcome, Conclusion) else outcome

    def receive(self, delivery: Delivery) -> Decision | Conclusion:
        """Handle one delivery up to the end of its job's run; never raises.

        A job that ran comes back as a ``Conclusion``: storing and publishing its result is left to
        ``finish``, which the caller may run on another thread while this one takes the next job. The job
        stays in the registry until ``finish`` has run, so a twin delivery still waits for its result.
        """
        return self.start([delivery]).outcomes()[0]

    def receive_pack(self, deliveries: Sequence[Delivery]) -> list[Decision | Conclusion]:
        """``receive`` for each of ``deliveries`` (tiny jobs, ``runtime.scheduler.packing``), in one backend task."""
        return self.start(deliveries).outcomes()

    def start(self, deliveries: Sequence[Delivery]) -> Started:
        """Handle deliveries up to their jobs' submission; never raises. ``outcomes`` of the returned
        ``Started`` waits for the runs and gives one outcome per delivery, in order, each what ``receive``
        gives it.

        Several deliveries (tiny jobs, ``runtime.scheduler.packing``; needs a backend that ``packs``) run in one
        backend task; a job answered from the store, rejected, cancelled or failed is so alone. A job
        submitted to a backend that can (``ExecutionBackend.submit``) is on its way to a worker when this
        returns, so the slot may take its next message before waiting (docs/scheduler.md, "Submit ahead").
        """
        parts: list[_Part] = []
        admitted: list[tuple[int, _Admitted]] = []
        for index, delivery in enumerate(deliveries):
            part = self._admit_delivery(delivery)
            if isinstance(part, _Admitted):
                admitted.append((index, part))
            parts.append(part)  # type: ignore[arg-type]  # an admitted job's place, filled once it ran
        if not admitted:
            return _resolved(parts)
        jobs = [(a.request, a.attempt) for _, a in admitted]
        try:
            run: Submission | Exception = submission(self._backend, jobs)
        except Exception as exc:  # mapped onto each job's outcome, as a failure of its run is
            run = exc

        def outcomes() -> list[Decision | Conclusion]:
            ran, began = _waited(run, len(admitted))
            for (index, admission), outcome, at in zip(admitted, ran, began, strict=True):
                parts[index] = self._ran(admission, outcome, at)
            return _decided(parts)

        if isinstance(run, Exception) or not run.in_flight:
            return Started(outcomes)
        return Started(outcomes, in_flight=True, ready=run.done, on_ready=run.add_done_callback,
                       start_clock=run.start_clock)

    def _admit_delivery(self, delivery: Delivery) -> Decision | Conclusion | _Admitted | Callable[[], Decision]:
        """A delivery's outcome if it needs no run (rejected, answered from the store, cancelled before it
        started, a store failure), the wait for its twin running here, or the job admitted to run."""
        job_id = None
        try:
            request = delivery.request
            if isinstance(request, InvalidRequest):
                return self._reject(delivery, request)
            job_id = request.job_id
            admission = self._admit(request, delivery)
        except Exception as exc:  # the store or the broker failed: let Pub/Sub redeliver this one
            return _infrastructure_error(job_id, exc)
        if isinstance(admission, _Admitted) and admission.cancelled:
            return self._ran(admission, JobCancelled("cancelled before it started"), datetime.now(UTC))
        return admission

    def finish(self, conclusions: Sequence[Conclusion]) -> list[Decision]:
        """Conclude jobs that ran: each result stored, all published in one Publish, each marked published.

        One decision per conclusion, in order; never raises: a job whose store write fails, or all of them
        if the Publish fails, is nacked (redelivered, then answered from the store). Every job leaves the
        registry at the end, once its result is stored.
        """
        decisions: list[Decision | None] = [None] * len(conclusions)
        stored: list[tuple[int, JobResult]] = []
        try:
            for index, conclusion in enumerate(conclusions):
                try:
                    result = publishable(conclusion.result())
                    self._store.put(result)
                except Exception as exc:
                    decisions[index] = _infrastructure_error(conclusion.job_id, exc)
                    continue
                self._index(result)
                stored.append((index, result))
            try:
                self._publish([result for _, result in stored])
            except Exception as exc:
                for index, result in stored:
                    decisions[index] = _infrastructure_error(result.job_id, exc)
                stored = []
            for index, result in stored:
                conclusion = conclusions[index]
                try:
                    self._store.mark_published(result.job_id)
                except Exception as exc:
                    decisions[index] = _infrastructure_error(result.job_id, exc)
                    continue
                self._metrics.jobs.labels(result.type.value if result.type else "unknown", result.status.value).inc()
                log.info("result published: %s", result.status.value, extra={"job_id": result.job_id})
                decisions[index] = Decision(conclusion.settle, result.job_id, result,
                                            reason=conclusion.reason or result.status.value)
        finally:
            for conclusion in conclusions:
                conclusion.done()  # after the result is stored: a twin delivery waiting for it then finds it
        return [decision for decision in decisions if decision is not None]

    def _index(self, result: JobResult) -> None:
        """Index a stored success in the result cache: after the store write, so an entry always finds its
        result, and before the publish, so whoever has the result and asks for the same computation again is
        answered from the cache (indexed after the publish, a repeat sent at once could arrive first and run
        again). A failure only loses the cache hit (later requests run), never the job's own answer."""
        key = result_key(result)
        if key is None:
            return
        try:
            self._store.put_cache_entry(key, result.job_id)
        except Exception:
            log.warning("could not index the result in the result cache", exc_info=True,
                        extra={"job_id": result.job_id})

    def _publish(self, results: Sequence[JobResult]) -> None:
        if len(results) == 1:
            self._sink.publish_result(results[0])
        elif results:
            self._sink.publish_results(results)

    # --- the paths -----------------------------------------------------------------------------------

    def _reject(self, delivery: Delivery, exc: InvalidRequest) -> Decision:
        # Not stored: a rejected message is no job, and its id may be fixed and sent again. Named by the job id
        # its own body gives, never by the `job_id` attribute, which nothing ties to the body: a garbage body
        # must not answer `rejected` for another job (docs/scheduler.md, "Whose result is it").
        job_id = _usable_job_id(exc.job_id, delivery.message_id)
        # Label by a known type only: an attribute from the wire must not create new metric series.
        job_type = delivery.attributes.get("type")
        job_type = job_type if job_type in _KNOWN_TYPES else "unknown"
        result = publishable(JobResult(job_id=job_id, status=JobStatus.REJECTED, attempt=delivery.delivery_attempt,
                                       error=JobError(kind=ErrorKind.INVALID, message=str(exc))))
        result = result.answering(delivery.data, delivery.message_id)
        self._sink.publish_result(result)
        self._metrics.jobs.labels(job_type, JobStatus.REJECTED.value).inc()
        log.warning("rejected an invalid request: %s", exc, extra={"job_id": job_id})
        return Decision(Settle.ACK, job_id, result, reason="invalid request")

    def _admit(self, request: JobRequest, delivery: Delivery) -> Decision | _Admitted | Callable[[], Decision]:
        """Answer from the store, or register the job as running here and say how to run it; a twin of a job
        running here gets the wait for that job's result, done when its outcome is asked for."""
        replay = delivery.attributes.get(contract.REPLAY_ATTRIBUTE) is not None
        if self._registry.get(request.job_id) is not None:
            # Running or concluding here: its result may be stored and published but not yet marked, and
            # answering from the store now would publish it a second time. Wait for it instead - later: the
            # job may be the one this slot submitted last, which ends only once the slot waits for it.
            return lambda: self._running_elsewhere_here(request, delivery, replay)
        stored = self._answer_from_store(request, delivery, replay, asked_again=delivery.delivery_attempt <= 1)
        if stored is not None:
            return stored
        if request.session_id is not None:
            # Before the job starts, so a session's listing shows it while it runs (docs/scheduler.md, "Sessions").
            self._store.add_to_session(request.session_id, request.job_id)
        entry = self._registry.begin(request, delivery.delivery_attempt)
        if entry is None:
            return lambda: self._running_elsewhere_here(request, delivery, replay)
        try:
            cancelled = entry.cancel_requested or self._store.cancel_requested(request.job_id)
            hit = None if cancelled else self._answer_from_cache(request, delivery)
        except BaseException:
            self._registry.end(entry)
            raise
        if hit is not None:
            self._registry.end(entry)  # after the store write: a twin waiting for it answers from the store
            return hit
        attempt = max(1, delivery.delivery_attempt)
        if attempt > 1 and not replay:
            self._metrics.retries.labels(request.type.value).inc()
        log.info("running job (attempt %d)", attempt, extra={"job_id": request.job_id, "type": request.type.value})
        return _Admitted(request, delivery, entry, attempt, cancelled)

    def _answer_from_store(self, request: JobRequest, delivery: Delivery, replay: bool,
                           asked_again: bool = False) -> Decision | None:
        """Answer a job that already has a terminal result without running it again.

        ``asked_again`` is a new message for a finished job id (its first delivery): the client is asking,
        so the stored result is published again, which is what makes the post-deploy probe's fixed ``deploy-probe``
        answerable on every deploy. A redelivery of a message whose result is already out stays quiet. The
        answer names ``delivery``'s body (``JobResult.answering``): the job id's result answers each request
        for that id that asks for the same computation, whatever its spelling. A request for another
        computation under a finished id gets a ``rejected`` conflict instead, never the stored result under its
        digest (docs/scheduler.md, "What a result's digest proves").
        """
        stored = self._store.get(request.job_id)
        if stored is None or (replay and stored.status is JobStatus.FAILED):
            return None
        if stored.computation_digest is not None and stored.computation_digest != request.computation_digest():
            return self._conflict(request, delivery, stored)
        answer = stored.answering(delivery.data, delivery.message_id)
        if asked_again or not self._store.is_published(request.job_id):
            self._sink.publish_result(answer)  # the earlier run may also have stopped between store and publish
            self._store.mark_published(request.job_id)
        log.info("duplicate delivery answered from the result store", extra={"job_id": request.job_id})
        return Decision(Settle.ACK, request.job_id, answer, reason="duplicate")

    def _answer_from_cache(self, request: JobRequest, delivery: Delivery) -> Decision | None:
        """Answer ``request`` with an earlier success of the same computation and kernel version, without a run;
        ``None`` when there is none or it may not be (docs/scheduler.md, "Result cache").

        The same order as a run's result: stored under the new job id (so a redelivery is answered from the
        store by id), then published, then marked published, and only then acked.
        """
        key = request_key(request, self._kernel_version)
        if key is None:
            return None
        source_id = self._store.cached_job(key)
        source = self._store.get(source_id) if source_id is not None else None
        if source is None or not answers(source, request, self._kernel_version):
            self._metrics.cache_misses.labels(request.type.value).inc()
            return None
        answer = publishable(cached_answer(request, source)).answering(delivery.data, delivery.message_id)
        self._store.put(answer)
        self._sink.publish_result(answer)
        self._store.mark_published(request.job_id)
        self._metrics.cache_hits.labels(request.type.value).inc()
        self._metrics.jobs.labels(request.type.value, answer.status.value).inc()
        log.info("answered from the result cache", extra={"job_id": request.job_id, "cached_from": source.job_id})
        return Decision(Settle.ACK, request.job_id, answer, reason="cached")

    def _conflict(self, request: JobRequest, delivery: Delivery, stored: JobResult) -> Decision:
        answer = conflict_result(request, stored).answering(delivery.data, delivery.message_id)
        self._sink.publish_result(answer)
        self._metrics.jobs.labels(request.type.value, JobStatus.REJECTED.value).inc()
        log.warning("a request for another computation under a finished job id: rejected as a conflict",
                    extra={"job_id": request.job_id})
        return Decision(Settle.ACK, request.job_id, answer, reason="conflict")

    def _running_elsewhere_here(self, request: JobRequest, delivery: Delivery, replay: bool) -> Decision:
        # Acking now could lose the job if the running delivery then fails transiently; nacking now
        # burns an attempt. Wait for the running one, then answer from the store.
        self._registry.wait(request.job_id, request.timeout_s + DUPLICATE_WAIT_MARGIN_S)
        try:
            stored = self._answer_from_store(request, delivery, replay=False)
        except Exception as exc:  # the store or the broker failed: let Pub/Sub redeliver
            return _infrastructure_error(request.job_id, exc)
        if stored is not None:
            return stored
        return Decision(Settle.NACK, request.job_id, reason="same job was running here and has no result yet")

    def _ran(self, admitted: _Admitted, outcome: Execution | Exception, began: datetime) -> Decision | Conclusion:
        """What a job's run (or its failure), begun at ``began``, leaves: a nack now, or a result to conclude."""
        queue_wait = None
        delivery = admitted.delivery
        if delivery.publish_time is not None:
            # Publish to the job's start on its worker: a job submitted ahead waited there too.
            queue_wait = max(0.0, (began - delivery.publish_time).total_seconds())
            self._metrics.job_started(delivery.queue, queue_wait)
        conclusion = self._outcome(admitted, outcome, queue_wait)
        if isinstance(conclusion, Decision):
            self._registry.end(admitted.entry)
            return conclusion
        entry, build = admitted.entry, conclusion.result
        return dataclasses.replace(conclusion, result=lambda: build().answering(delivery.data, delivery.message_id),
                                   done=lambda: self._registry.end(entry))

    def _outcome(self, admitted: _Admitted, outcome: Execution | Exception,
                 queue_wait: float | None) -> Decision | Conclusion:
        request, attempt = admitted.request, admitted.attempt
        if not isinstance(outcome, Exception):
            return self._succeeded(request, attempt, outcome, queue_wait)
        if isinstance(outcome, JobCancelled):
            return self._final(request, attempt, JobStatus.CANCELLED, queue_wait, ErrorKind.CANCELLED, str(outcome))
        if isinstance(outcome, PermanentJobError):
            return self._final(request, attempt, JobStatus.FAILED, queue_wait, ErrorKind.PERMANENT, str(outcome))
        # Transient, or unforeseen: another delivery may succeed.
        if admitted.entry.cancel_requested:
            return self._final(request, attempt, JobStatus.CANCELLED, queue_wait, ErrorKind.CANCELLED,
                               "cancelled by request")
        reason = str(outcome) or type(outcome).__name__
        if attempt >= self._max_attempts:
            message = f"gave up after {attempt} deliveries; last error: {reason}"
            # `failed` is out first; then the nack makes Pub/Sub dead-letter the message for `gpurt dlq replay`.
            return self._final(request, attempt, JobStatus.FAILED, queue_wait, ErrorKind.TRANSIENT, message,
                               settle=Settle.NACK, reason="last attempt: dead-letter")
        log.warning("transient failure, Pub/Sub will redeliver: %s", reason, extra={"job_id": request.job_id})
        return Decision(Settle.NACK, request.job_id, reason=f"transient: {reason}")

    def _succeeded(self, request: JobRequest, attempt: int, execution: Execution,
                   queue_wait: float | None) -> Conclusion:
        self._metrics.duration.labels(request.type.value).observe(execution.elapsed_s)

        def result() -> JobResult:
            urls = self._store.put_artifacts(request.job_id, execution.artifacts)
            return succeeded_result(request, execution, urls, attempt=attempt, queue_wait_s=queue_wait,
                                    kernel_version=self._kernel_version)
        return Conclusion(request.job_id, result)

    def _final(self, request: JobRequest, attempt: int, status: JobStatus, queue_wait: float | None,
               kind: ErrorKind, message: str, *, settle: Settle = Settle.ACK, reason: str | None = None) -> Conclusion:
        result = ended_result(request, status, kind, message, attempt=attempt, queue_wait_s=queue_wait)
        log.info("job %s: %s", status.value, message, extra={"job_id": request.job_id})
        return Conclusion(request.job_id, lambda: result, settle, reason)


@dataclasses.dataclass(frozen=True)
class _Admitted:
    """A job registered as running here, about to run."""

    request: JobRequest
    delivery: Delivery  # the message it came in, which its result answers
    entry: InFlight
    attempt: int
    cancelled: bool  # a cancel request came before it started


def _waited(run: Submission | Exception, jobs: int) -> tuple[list[Execution | Exception], list[datetime]]:
    """The outcome and start of each of ``jobs`` jobs; a submission that failed, or whose wait raised, is every
    job's failure, begun now."""
    if not isinstance(run, Exception):
        try:
            return run.wait(), run.started
        except Exception as exc:  # unforeseen: every job gets another delivery
            run = exc
    return [run] * jobs, [datetime.now(UTC)] * jobs


def _decided(parts: Sequence[_Part]) -> list[Decision | Conclusion]:
    """Each part's outcome: as decided, or, for a twin of a job running here, once its wait ends."""
    return [part() if callable(part) else part for part in parts]


def _resolved(parts: list[_Part]) -> Started:
    """Outcomes that need no run: decided, or a twin's wait for the job running here."""
    return Started(lambda: _decided(parts), ready=lambda: not any(callable(part) for part in parts))


def _infrastructure_error(job_id: str | None, exc: Exception) -> Decision:
    log.exception("could not finish a delivery; it will be redelivered", extra={"job_id": job_id})
    return Decision(Settle.NACK, job_id, reason=f"infrastructure error: {exc}")


def _usable_job_id(candidate: str | None, message_id: str) -> str:
    # A result always needs an id: the message id is the platform's own, and no request can give it.
    if is_job_id(candidate):
        return candidate
    return f"invalid-{message_id}"
