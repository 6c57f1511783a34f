"""Processor branches that need a crash to reach end to end: unpublished stored results, replays, running twins."""

from __future__ import annotations

import dataclasses
import json
import threading
import uuid

import pytest

from kernels.errors import TransientJobError
from kernels.version import KERNEL_VERSION
from runtime.protocol import contract
from runtime.protocol.messages import ErrorKind, JobRequest, JobResult, JobStatus, parse_request, request_digest
from runtime.scheduler import records
from runtime.scheduler.backends.base import Execution
from runtime.scheduler.metrics import SchedulerMetrics
from runtime.scheduler.packing import tiny_job_id
from runtime.scheduler.processor import Processor
from runtime.scheduler.records import Conclusion, Decision, Delivery, Settle
from runtime.scheduler.registry import JobRegistry
from runtime.scheduler.store import ResultStore
from tests.runtime.scheduler.platform import IdleBackend, ListSink


class GatedBackend(IdleBackend):
    """Runs jobs instantly, or waits on ``gate`` for job ids in ``hold``; fails ids in ``fail``."""

    name = "gated"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.gate = threading.Event()
        self.started = threading.Event()
        self.hold: set[str] = set()
        self.fail: set[str] = set()
        self.packs: list[list[str]] = []
        self.summary: dict[str, object] = {"ok": True}

    def run(self, request: JobRequest, *, attempt: int) -> Execution:
        self.calls.append(request.job_id)
        if request.job_id in self.hold:
            self.started.set()
            self.gate.wait(10)
        if request.job_id in self.fail:
            raise TransientJobError("boom")
        return Execution(summary=self.summary, artifacts={"out.txt": b"x"}, elapsed_s=0.01, paths=10)

    def run_pack(self, jobs: list[tuple[JobRequest, int]]) -> list[Execution | Exception]:
        self.packs.append([request.job_id for request, _ in jobs])
        outcomes: list[Execution | Exception] = []
        for request, attempt in jobs:
            try:
                outcomes.append(self.run(request, attempt=attempt))
            except Exception as exc:
                outcomes.append(exc)
        return outcomes


def _setup() -> tuple[Processor, GatedBackend, ResultStore, ListSink]:
    backend, store, sink = GatedBackend(), ResultStore(f"memory://proc-{uuid.uuid4().hex}"), ListSink()
    return Processor(backend, store, sink, JobRegistry(), SchedulerMetrics()), backend, store, sink


def _delivery(job_id: str, attempt: int = 1, session_id: str | None = None, **attributes: str) -> Delivery:
    body = JobRequest.model_validate({"job_id": job_id, "type": "noop", "session_id": session_id}) \
        .model_dump_json().encode()
    return Delivery(message_id=uuid.uuid4().hex, data=body, attributes=attributes, delivery_attempt=attempt,
                    publish_time=None)


def test_a_stored_but_unpublished_result_is_published_once_without_rerunning() -> None:
    processor, backend, store, sink = _setup()
    store.put(JobResult(job_id="j1", status=JobStatus.SUCCEEDED))  # crashed before the publish
    assert processor.process(_delivery("j1", attempt=2)).settle is Settle.ACK
    assert processor.process(_delivery("j1", attempt=3)).settle is Settle.ACK
    assert backend.calls == [] and [r.job_id for r in sink.published] == ["j1"]


def test_a_new_request_for_a_finished_job_is_answered_but_a_redelivery_is_not_republished() -> None:
    processor, backend, _, sink = _setup()
    assert processor.process(_delivery("probe")).result.status is JobStatus.SUCCEEDED
    again = processor.process(_delivery("probe"))  # a new message with the same job id (the probe's fixed id)
    assert again.settle is Settle.ACK and again.reason == "duplicate"
    redelivered = processor.process(_delivery("probe", attempt=2))  # at-least-once redelivery of an acked message
    assert redelivered.settle is Settle.ACK
    assert backend.calls == ["probe"] and [r.job_id for r in sink.published] == ["probe", "probe"]


def test_a_replayed_dead_letter_runs_again_despite_its_failed_result() -> None:
    processor, backend, store, _ = _setup()
    store.put(JobResult(job_id="j2", status=JobStatus.FAILED, attempt=5))
    store.mark_published("j2")
    assert processor.process(_delivery("j2")).settle is Settle.ACK  # plain duplicate: answered
    assert backend.calls == []
    decision = processor.process(_delivery("j2", **{contract.REPLAY_ATTRIBUTE: "1"}))
    assert decision.settle is Settle.ACK and decision.result.status is JobStatus.SUCCEEDED
    assert backend.calls == ["j2"] and store.get("j2").status is JobStatus.SUCCEEDED


def test_a_twin_delivery_waits_for_the_running_one_and_is_answered_from_the_store() -> None:
    processor, backend, _, sink = _setup()
    backend.hold.add("j3")
    first = threading.Thread(target=processor.process, args=(_delivery("j3"),))
    first.start()
    assert backend.started.wait(10)
    twin: list = []
    second = threading.Thread(target=lambda: twin.append(processor.process(_delivery("j3", attempt=2))))
    second.start()
    backend.gate.set()
    first.join(10)
    second.join(10)
    assert twin[0].settle is Settle.ACK and twin[0].reason == "duplicate"
    assert backend.calls == ["j3"] and len(sink.published) == 1


def test_transient_failures_nack_until_the_last_attempt_which_publishes_failed() -> None:
    processor, backend, store, sink = _setup()
    backend.fail.add("j4")
    early = processor.process(_delivery("j4", attempt=contract.MAX_DELIVERY_ATTEMPTS - 1))
    assert early.settle is Settle.NACK and early.result is None and sink.published == []
    last = processor.process(_delivery("j4", attempt=contract.MAX_DELIVERY_ATTEMPTS))
    assert last.settle is Settle.NACK and last.result.status is JobStatus.FAILED
    assert store.get("j4").status is JobStatus.FAILED and store.is_published("j4")


def test_a_store_failure_becomes_a_nack_not_a_crash() -> None:
    processor, _, store, _ = _setup()
    store.put = lambda result: (_ for _ in ()).throw(OSError("bucket unreachable"))  # type: ignore[method-assign]
    decision = processor.process(_delivery("j5"))
    assert decision.settle is Settle.NACK and "bucket unreachable" in decision.reason


def test_a_sessions_jobs_are_listed_as_they_start_and_their_results_carry_the_session() -> None:
    processor, backend, store, sink = _setup()
    backend.hold.add("s-1")
    running = threading.Thread(target=processor.process, args=(_delivery("s-1", session_id="desk"),))
    running.start()
    assert backend.started.wait(10)
    assert store.session_jobs("desk") == ["s-1"] and store.get("s-1") is None  # listed while it runs
    backend.gate.set()
    running.join(10)
    backend.fail.add("s-2")
    processor.process(_delivery("s-2", attempt=5, session_id="desk"))  # the last attempt: failed
    processor.process(_delivery("alone"))

    assert store.session_jobs("desk") == ["s-1", "s-2"]
    assert {r.job_id: r.session_id for r in sink.published} == {"s-1": "desk", "s-2": "desk", "alone": None}
    assert store.get("s-2").session_id == "desk"


def test_receive_leaves_the_store_and_publish_to_the_conclusion_and_keeps_the_job_registered_until_then() -> None:
    processor, backend, store, sink = _setup()
    outcome = processor.receive(_delivery("c1"))
    assert isinstance(outcome, Conclusion) and outcome.job_id == "c1"
    assert backend.calls == ["c1"]  # the job ran
    assert store.get("c1") is None and sink.published == []  # its bookkeeping did not
    twin = processor._registry.get("c1")
    assert twin is not None  # a twin delivery meanwhile waits for the result instead of running it again
    (decision,) = processor.finish([outcome])
    assert decision.settle is Settle.ACK and decision.result is not None
    assert store.get("c1") == decision.result and store.is_published("c1")
    assert [r.job_id for r in sink.published] == ["c1"]
    assert processor._registry.get("c1") is None and twin.done.is_set()


def test_the_last_attempts_failure_concludes_with_a_nack_after_publishing_failed() -> None:
    processor, backend, store, sink = _setup()
    backend.fail.add("c2")
    outcome = processor.receive(_delivery("c2", attempt=contract.MAX_DELIVERY_ATTEMPTS))
    assert isinstance(outcome, Conclusion) and sink.published == []
    (decision,) = processor.finish([outcome])
    assert decision.settle is Settle.NACK and decision.reason == "last attempt: dead-letter"
    assert [r.status for r in sink.published] == [JobStatus.FAILED]
    stored = store.get("c2")
    assert stored is not None and stored.status is JobStatus.FAILED  # stored before it was published


def test_a_transient_failure_before_the_last_attempt_is_a_nack_with_nothing_to_conclude() -> None:
    processor, backend, _, sink = _setup()
    backend.fail.add("c3")
    outcome = processor.receive(_delivery("c3"))
    assert isinstance(outcome, Decision) and outcome.settle is Settle.NACK
    assert sink.published == [] and processor._registry.get("c3") is None


def test_only_a_backend_that_runs_packs_is_handed_them() -> None:
    class OneAtATime(IdleBackend):  # a backend like Vertex: every job is a run of its own
        name = "one-at-a-time"

        def __init__(self) -> None:
            self.calls: list[str] = []

        def run(self, request: JobRequest, *, attempt: int) -> Execution:
            self.calls.append(request.job_id)
            return Execution(summary={"ok": True}, artifacts={}, elapsed_s=0.01, paths=10)

    backend = OneAtATime()
    processor = Processor(backend, ResultStore(f"memory://proc-{uuid.uuid4().hex}"), ListSink(), JobRegistry(),
                          SchedulerMetrics())
    assert not processor.packs and _setup()[0].packs
    outcomes = processor.receive_pack([_delivery("alone-1"), _delivery("alone-2")])
    assert backend.calls == ["alone-1", "alone-2"]  # run one after another, when waited for
    assert [type(o) for o in outcomes] == [Conclusion, Conclusion]


def test_a_pack_runs_in_one_backend_call_and_publishes_together_yet_each_job_keeps_its_outcome() -> None:
    processor, backend, store, sink = _setup()
    assert processor.packs
    processor.process(_delivery("p-done"))  # already has a result: answered from the store, not run again
    backend.fail.add("p-bad")
    sink.published.clear()
    calls = sink.calls
    deliveries = [_delivery("p-1"), _delivery("p-bad"), _delivery("p-done", attempt=2),
                  Delivery("m-x", b"not json", {}, 1, None), _delivery("p-2")]
    outcomes = processor.receive_pack(deliveries)
    assert backend.packs == [["p-1", "p-bad", "p-2"]]  # one task for the jobs that had to run
    # A failing job fails alone: transient, nacked for another delivery; the others conclude.
    assert isinstance(outcomes[1], Decision) and outcomes[1].settle is Settle.NACK
    assert isinstance(outcomes[2], Decision) and outcomes[2].reason == "duplicate"
    assert isinstance(outcomes[3], Decision) and outcomes[3].result.status is JobStatus.REJECTED
    conclusions = [outcomes[0], outcomes[4]]
    assert all(isinstance(c, Conclusion) for c in conclusions)
    rejected_calls = sink.calls
    decisions = processor.finish(conclusions)
    assert [d.settle for d in decisions] == [Settle.ACK, Settle.ACK]
    assert sink.calls == rejected_calls + 1  # both results in one Publish
    assert [r.job_id for r in sink.published if r.status is JobStatus.SUCCEEDED] == ["p-1", "p-2"]
    assert all(store.is_published(job_id) for job_id in ("p-1", "p-2"))
    assert store.get("p-bad") is None and processor._registry.count() == 0
    assert calls < rejected_calls  # the rejected message's result went out on its own, at once


def test_a_packed_job_on_its_last_attempt_dead_letters_alone() -> None:
    processor, backend, store, _ = _setup()
    backend.fail.add("q-bad")
    outcomes = processor.receive_pack([_delivery("q-ok"), _delivery("q-bad", attempt=contract.MAX_DELIVERY_ATTEMPTS)])
    decisions = processor.finish([o for o in outcomes if isinstance(o, Conclusion)])
    assert [(d.job_id, d.settle) for d in decisions] == [("q-ok", Settle.ACK), ("q-bad", Settle.NACK)]
    failed = store.get("q-bad")
    assert failed is not None and failed.status is JobStatus.FAILED  # out before the nack dead-letters it


def test_a_packed_job_cancelled_before_it_starts_never_runs_and_the_others_do() -> None:
    processor, backend, store, _ = _setup()
    store.request_cancel("r-cancel")
    outcomes = processor.receive_pack([_delivery("r-cancel"), _delivery("r-run")])
    assert backend.calls == ["r-run"] and backend.packs == []  # the one job left runs alone
    decisions = processor.finish([o for o in outcomes if isinstance(o, Conclusion)])
    assert [(d.job_id, d.result.status) for d in decisions] == [("r-cancel", JobStatus.CANCELLED),
                                                                ("r-run", JobStatus.SUCCEEDED)]


def test_a_redelivery_while_the_result_is_concluding_waits_and_is_not_published_again() -> None:
    """The broker may redeliver between the conclusion's publish and its published marker (a restart's
    stream did): answering from the store then would publish the same result twice."""
    processor, _, _, sink = _setup()
    outcome = processor.receive(_delivery("c2"))
    twin: list = []
    redelivered: list[threading.Thread] = []
    publish = sink.publish_result

    def publish_then_redeliver(result: JobResult) -> str:
        message_id = publish(result)
        thread = threading.Thread(target=lambda: twin.append(processor.process(_delivery("c2", attempt=2))))
        thread.start()
        redelivered.append(thread)
        thread.join(0.5)  # time enough for a redelivery that does not wait to publish again
        return message_id

    sink.publish_result = publish_then_redeliver  # type: ignore[method-assign]
    (decision,) = processor.finish([outcome])
    redelivered[0].join(10)
    assert decision.settle is Settle.ACK and twin[0].settle is Settle.ACK
    assert [r.job_id for r in sink.published] == ["c2"]


def test_a_result_too_large_to_publish_is_a_permanent_failure_not_a_redelivery() -> None:
    # issue #35: a result over the publish limit failed every Publish alike: five deliveries, a dead letter
    processor, backend, store, sink = _setup()
    backend.summary = {"values": list(range(300_000))}
    decision = processor.process(_delivery("huge"))
    assert decision.settle is Settle.ACK and decision.result.status is JobStatus.FAILED
    assert decision.result.error.kind is ErrorKind.PERMANENT and "byte limit" in decision.result.error.message
    assert sink.published == [store.get("huge")] == [decision.result]


def test_each_delivery_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    parses: list[bytes] = []
    monkeypatch.setattr(records, "parse_request", lambda data: parses.append(data) or parse_request(data))
    processor, _, _, _ = _setup()
    delivery = _delivery("once")
    assert tiny_job_id(delivery) == "once"  # the consumer's packing check reads it first
    assert processor.process(delivery).result.status is JobStatus.SUCCEEDED
    assert parses == [delivery.data]


def test_every_result_names_the_body_and_message_it_answers_and_a_bogus_body_never_stands_for_an_id() -> None:
    processor, _, store, sink = _setup()
    bogus = Delivery(message_id="m-bogus", data=b'{"job_id": "victim", "type": "bogus"}', attributes={},
                     delivery_attempt=1, publish_time=None)
    rejected = processor.process(bogus).result
    assert (rejected.job_id, rejected.status) == ("victim", JobStatus.REJECTED)
    assert rejected.request_digest == request_digest(bogus.data) and rejected.request_message_id == "m-bogus"
    assert store.get("victim") is None  # a rejected body's result is never the id's result
    own = _delivery("victim", session_id="s")
    ran = processor.process(own).result
    assert ran.status is JobStatus.SUCCEEDED and ran.request_digest == request_digest(own.data)
    assert ran.request_message_id == own.message_id and store.get("victim") == ran
    again = _delivery("victim")  # another body for the id: answered from the store, naming that body
    answer = processor.process(again).result
    assert answer.request_digest == request_digest(again.data) != ran.request_digest
    assert answer.result == ran.result and sink.published[-1] == answer


def _option(job_id: str, strike: object, message_id: str, **extra: object) -> Delivery:
    params = {"spot": 100, "strike": strike, "rate": 0.05, "volatility": 0.2, "maturity": 1.0, "kind": "call",
              "paths": 1000, "seed": 7, **extra}
    body = json.dumps({"job_id": job_id, "type": "european_option", "params": params}).encode()
    return Delivery(message_id=message_id, data=body, attributes={}, delivery_attempt=1, publish_time=None)


def test_a_stored_result_never_answers_another_computation_under_its_id() -> None:
    """Issue 43's relabel: strike 1 run under the victim's id must not answer the victim's strike 100 as its own."""
    processor, backend, store, sink = _setup()
    backend.summary = {"estimate": 99.05}
    assert processor.process(_option("victim", 1, "m-attacker")).result.status is JobStatus.SUCCEEDED
    victim = _option("victim", 100, "m-victim")
    decision = processor.process(victim)
    answer = decision.result
    assert decision.settle is Settle.ACK and decision.reason == "conflict"
    assert answer.status is JobStatus.REJECTED and answer.error.kind is ErrorKind.CONFLICT
    assert answer.result is None and "different computation" in answer.error.message
    # it names the victim's body, so the victim's client takes it (and sees the conflict, not a price)
    assert answer.request_digest == request_digest(victim.data) and sink.published[-1] == answer
    assert backend.calls == ["victim"]  # nothing ran for it
    assert store.get("victim").result == {"estimate": 99.05}  # the id's result stays the one that ran
    assert store.get("victim").request_digest != answer.request_digest


def test_the_same_computation_spelled_otherwise_is_answered_from_the_store() -> None:
    processor, backend, _, _ = _setup()
    ran = processor.process(_option("same", 100, "m-1")).result
    # 100.0 for 100, a default given explicitly, a session and a timeout: the same computation
    respelled = _option("same", 100.0, "m-2", antithetic=True)
    respelled = dataclasses.replace(
        respelled, data=respelled.data.replace(b"{", b'{"session_id": "s", "timeout_s": 60, ', 1))
    decision = processor.process(respelled)
    assert decision.reason == "duplicate" and decision.result.status is JobStatus.SUCCEEDED
    assert decision.result.result == ran.result and decision.result.computation_digest == ran.computation_digest
    assert backend.calls == ["same"]


def test_a_twin_for_another_computation_waits_for_the_running_one_then_gets_a_conflict() -> None:
    processor, backend, _, _ = _setup()
    backend.hold.add("held")
    first = threading.Thread(target=processor.process, args=(_option("held", 100, "m-1"),))
    first.start()
    assert backend.started.wait(10)
    other: list[Decision] = []
    twin = threading.Thread(target=lambda: other.append(processor.process(_option("held", 1, "m-2"))))
    twin.start()
    backend.gate.set()
    first.join(10)
    twin.join(10)
    assert other[0].reason == "conflict" and other[0].result.error.kind is ErrorKind.CONFLICT
    assert backend.calls == ["held"]


# --- the result cache (docs/scheduler.md, "Result cache") ----------------------------------------------------


def _cache_counts(processor: Processor) -> tuple[float, float]:
    registry = processor._metrics.registry
    hits = registry.get_sample_value(f"{contract.METRICS.result_cache_hits_total}", {"type": "european_option"})
    misses = registry.get_sample_value(f"{contract.METRICS.result_cache_misses_total}", {"type": "european_option"})
    return hits or 0.0, misses or 0.0


def test_a_repeated_computation_is_answered_from_the_cache_bit_identical_without_a_run() -> None:
    processor, backend, store, sink = _setup()
    backend.summary = {"estimate": 10.45, "values": [0.1, 1e-300, 3.14159]}
    first = processor.process(_option("first", 100, "m-1")).result
    assert first.kernel_version is not None and not first.cached
    # the same computation spelled otherwise, under another id and session
    repeat = _option("second", 100.0, "m-2", seed=7)
    repeat = dataclasses.replace(repeat, data=repeat.data.replace(b"{", b'{"session_id": "desk", ', 1))
    decision = processor.process(repeat)
    answer = decision.result
    assert decision.settle is Settle.ACK and decision.reason == "cached"
    assert backend.calls == ["first"]  # nothing ran for the repeat
    assert answer.cached and answer.cached_from == "first" and answer.status is JobStatus.SUCCEEDED
    # what the client matches: its own job id and the digest of its own body
    assert answer.job_id == "second" and answer.session_id == "desk"
    assert answer.request_digest == request_digest(repeat.data) and answer.request_message_id == "m-2"
    assert json.dumps(answer.result) == json.dumps(first.result) and answer.artifacts == first.artifacts
    assert answer.metrics.run_s is None  # it ran nothing
    # stored under the new id before it went out, and marked: a redelivery is answered from the store by id
    assert store.get("second") == answer and store.is_published("second") and sink.published[-1] == answer
    assert store.session_jobs("desk") == ["second"]
    again = processor.process(dataclasses.replace(repeat, delivery_attempt=2))
    assert again.reason == "duplicate" and backend.calls == ["first"]
    assert _cache_counts(processor) == (1.0, 1.0)  # the first looked and missed


def test_a_result_is_in_the_cache_before_it_is_published() -> None:
    """A client that sends the same computation the moment its result arrives is answered from the cache: the
    index entry is written before the publish (an end-to-end repeat once ran again, indexed only after it)."""
    from runtime.scheduler.result_cache import request_key

    processor, _, store, sink = _setup()
    first = _option("first", 100, "m-1")
    key = request_key(first.request, KERNEL_VERSION)  # type: ignore[arg-type]
    indexed_at_publish: list[str | None] = []
    publish = sink.publish_results

    def publish_after_looking(results: list[JobResult]) -> list[str]:
        indexed_at_publish.append(store.cached_job(key))  # type: ignore[arg-type]
        return publish(results)

    sink.publish_results = publish_after_looking  # type: ignore[method-assign]
    assert processor.process(first).reason == "succeeded"
    assert indexed_at_publish == ["first"]


def test_cache_false_runs_again() -> None:
    processor, backend, _, _ = _setup()
    processor.process(_option("first", 100, "m-1"))
    fresh = _option("fresh", 100, "m-2")
    decision = processor.process(dataclasses.replace(fresh, data=fresh.data.replace(b"{", b'{"cache": false, ', 1)))
    assert decision.reason == "succeeded" and not decision.result.cached
    assert backend.calls == ["first", "fresh"]


def test_another_kernel_version_another_param_or_a_noop_misses() -> None:
    processor, backend, store, sink = _setup()
    processor.process(_option("first", 100, "m-1"))
    assert processor.process(_option("other-seed", 100, "m-2", seed=8)).reason == "succeeded"
    newer = Processor(backend, store, sink, JobRegistry(), SchedulerMetrics(), kernel_version="edited-kernels")
    decision = newer.process(_option("new-kernels", 100, "m-3"))
    assert decision.reason == "succeeded" and decision.result.kernel_version == "edited-kernels"
    for index in range(2):
        processor.process(_delivery(f"noop-{index}"))
    assert backend.calls == ["first", "other-seed", "new-kernels", "noop-0", "noop-1"]


def test_a_changed_parameter_default_misses(monkeypatch: pytest.MonkeyPatch) -> None:
    """A body that leaves a field out means its default: when the default changes, the old result is another's."""
    from kernels.params import PARAMS_BY_TYPE, EuropeanOptionParams, JobType

    processor, backend, _, _ = _setup()
    processor.process(_option("first", 100, "m-1"))

    class NewDefault(EuropeanOptionParams):
        confidence: float = 0.95  # was DEFAULT_CONFIDENCE (0.99)

    monkeypatch.setitem(PARAMS_BY_TYPE, JobType.EUROPEAN_OPTION, NewDefault)
    assert processor.process(_option("after-the-change", 100, "m-2")).reason == "succeeded"
    assert backend.calls == ["first", "after-the-change"]


def test_only_a_success_that_ran_answers_from_the_cache() -> None:
    backend, store, sink = GatedBackend(), ResultStore(f"memory://proc-{uuid.uuid4().hex}"), ListSink()
    processor = Processor(backend, store, sink, JobRegistry(), SchedulerMetrics(), max_attempts=1)
    backend.fail.add("failed")
    assert processor.process(_option("failed", 100, "m-1")).result.status is JobStatus.FAILED
    assert processor.process(_option("ran", 100, "m-2")).reason == "succeeded"
    assert processor.process(_option("copy", 100, "m-3")).result.cached_from == "ran"
    # a copy is never indexed itself: the entry still names the job that ran
    assert processor.process(_option("copy-2", 100, "m-4")).result.cached_from == "ran"
    assert backend.calls == ["failed", "ran"]


def test_an_index_entry_for_another_computation_finds_nothing() -> None:
    """The index only names a job id: the result it finds must itself be the same computation and kernels."""
    from runtime.scheduler.result_cache import request_key

    processor, backend, store, _ = _setup()
    processor.process(_option("strike-1", 1, "m-1"))
    victim = _option("victim", 100, "m-2")
    store.put_cache_entry(request_key(victim.request, KERNEL_VERSION), "strike-1")  # type: ignore[arg-type]
    decision = processor.process(victim)
    assert decision.reason == "succeeded" and not decision.result.cached
    assert backend.calls == ["strike-1", "victim"]
