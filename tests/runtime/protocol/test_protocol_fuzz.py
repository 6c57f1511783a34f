"""Malformed requests, each rejected once, at once: 10,000 through the processor, a sample end to end.

The corpus (``fuzz_corpus``) mixes every malformed kind: random bytes, truncation, nesting bombs,
NaN/Infinity/1e400, huge integers, duplicate keys, invalid UTF-8, UTF-16/32, lone surrogates, wrong
types, unknown types, bad params, oversize bodies, bodies built to be slow to parse (up to the size
limit), and bodies published under another job's ``job_id`` attribute, which must get no result.

Ten thousand of them go through the scheduler's ``Processor`` in this process (the code that parses a
delivery and decides on it), which is fast enough to fuzz widely. A sample with every kind, bare
messages (no attributes) and the reported body among them goes through the real client to the local
platform, which proves what only a platform shows: each is acked on its first delivery (no redelivery,
nothing dead-lettered), its result names the real message id where the body has no usable job id, and
the consumer stays up and runs a normal job afterwards. Published with google-cloud-pubsub (batched),
collected with the project's ``ResultCollector`` on a private subscription of the result topic.
"""

from __future__ import annotations

import gc
import json
import logging
import subprocess
import sys
import threading
import time
import tracemalloc
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from runtime.access.transport import ResultCollector
from runtime.local.platform import LocalConfig, LocalPlatform
from runtime.protocol import contract
from runtime.protocol.messages import MAX_MESSAGE_BYTES, ErrorKind, JobRequest, JobResult, JobStatus
from runtime.scheduler.metrics import SchedulerMetrics
from runtime.scheduler.processor import Processor
from runtime.scheduler.records import Delivery, Settle
from runtime.scheduler.registry import JobRegistry
from runtime.scheduler.store import ResultStore
from tests.runtime.protocol.fuzz_corpus import AMPLIFICATION, ISSUE_BODY, KINDS, FuzzMessage, corpus
from tests.runtime.scheduler.platform import IdleBackend, ListSink
from validation.dlq import DeadLetterQueue

MESSAGES = 10_000  # the issue's bar: at least ten thousand
# The end-to-end sample: the three oversize bodies, the reported one, then every kind at least three times.
SAMPLE = 64
RESULTS_TIMEOUT_S = 120.0  # the sample is rejected in seconds; a loaded 2-core box is slower
BACKLOG_TIMEOUT_S = 20.0  # the consumer's acks reach the broker within moments of the results
STOP_GRACE_S = 3.0  # the platform is thrown away afterwards
# Messages the consumer holds at once. Rejections never reach Dask, so the GPU slots that normally bound
# this (two local workers) would only make the test slow; one worker runs the normal job afterwards.
IN_FLIGHT = "16"
# What one amplification body may cost the processor, measured (issue #35: the reported body took 2-3.3 s
# to parse, grew the scheduler by 300 MB and answered with 20 MB of errors, over the publish limit).
AMPLIFICATION_CPU_S = 1.0  # CPU seconds of this process; about 0.3 s on a loaded 2-core box
AMPLIFICATION_PEAK_BYTES = 48_000_000  # Python allocations at their peak (tracemalloc); about 17 MB
AMPLIFICATION_RESULT_BYTES = 4_096  # the rejected result's JSON
AMPLIFICATION_SIZES = (16_000, 200_000, MAX_MESSAGE_BYTES)
# Rejected requests whose memory must stay flat (issue 43: each kept ~8 KB, and 8 MB per 0.9 MB body, for ever).
LEAK_MESSAGES = 1_000
# Warm-up before the baseline: metric series, pydantic's and the regex engine's caches fill on the first few.
LEAK_WARM_UP = 200
# What 1,000 rejections may leave allocated after a full collection, all of it (tracemalloc, in a child
# process of its own, so no other test's threads allocate meanwhile): about 30 KB measured, the json
# module's scanner objects awaiting reuse; today's leak kept 45 MB for the same corpus. Allocation counts do
# not depend on the machine's load, so the bound can be tight.
LEAK_BOUND_BYTES = 512_000
LEAK_BODY_BYTES = 64_000
# What a processed body at the size limit may leave allocated (issue 43: 8 MB kept per 0.9 MB body); about
# 3 KB measured, in a process of its own.
AMPLIFICATION_KEPT_BYTES = 64_000
ROOT = Path(__file__).resolve().parents[3]


class _NoBackend(IdleBackend):
    """A backend no malformed message may reach: running anything fails the test."""

    name = "none"

    def run(self, request: JobRequest, *, attempt: int) -> None:
        raise AssertionError(f"a malformed message reached the backend as job {request.job_id}")


@pytest.mark.slow  # ten thousand parses, some of bodies at the size limit: seconds, no process started
def test_every_fuzzed_message_gets_one_rejected_result_from_the_processor() -> None:
    messages = corpus(MESSAGES, "fuzz")
    sink = ListSink()
    processor = Processor(_NoBackend(), ResultStore(f"memory://fuzz-{uuid.uuid4().hex}"), sink,  # type: ignore[arg-type]
                          JobRegistry(), SchedulerMetrics())
    per_message: dict[int, list[JobResult]] = defaultdict(list)
    message_ids = [f"m{m.index}" for m in messages]
    owner = _owners(messages, message_ids)
    for message, message_id in zip(messages, message_ids, strict=True):
        before = len(sink.published)
        decision = processor.process(Delivery(message_id, message.data, message.attributes, 1, None))
        assert decision.settle is Settle.ACK, (message.kind, decision.reason)
        for result in sink.published[before:]:
            assert result.job_id in owner, f"a result for {result.job_id}, which no fuzzed message names"
            per_message[owner[result.job_id]].append(result)
    _assert_one_rejection_each(messages, per_message)


@pytest.fixture(scope="module")
def amplification_costs() -> dict[str, list[dict[str, Any]]]:
    """What each amplification body cost a processor, measured in a child process of its own: tracemalloc and
    ``time.process_time`` count every thread of the process they run in, and an xdist worker still carries
    the threads of the tests it ran before (one left 325 KB allocated inside this measurement once)."""
    costs: dict[str, list[dict[str, Any]]] = _in_a_child("_amplification_costs")
    return costs


def _in_a_child(function: str) -> Any:
    """Run this module's ``function`` in a child process of its own, where no other test's threads allocate or
    use CPU meanwhile; the JSON it prints on its last line."""
    child = subprocess.run([sys.executable, "-c", f"from {__name__} import {function}; {function}()"],
                           cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    assert child.returncode == 0, child.stderr[-4000:]
    return json.loads(child.stdout.splitlines()[-1])


@pytest.mark.slow  # three bodies of each kind up to the size limit, each twice (once under tracemalloc)
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", sorted(AMPLIFICATION))
def test_an_amplification_body_costs_bounded_cpu_memory_and_result_size(
        name: str, amplification_costs: dict[str, list[dict[str, Any]]]) -> None:
    assert [cost["size"] for cost in amplification_costs[name]] == list(AMPLIFICATION_SIZES)
    for cost in amplification_costs[name]:
        what = f"{name} of {cost['bytes']:,} bytes"
        assert cost["settle"] == Settle.ACK.value and cost["status"] == JobStatus.REJECTED.value, (
            what, cost["reason"])
        assert cost["cpu_s"] < AMPLIFICATION_CPU_S, f"{what} took {cost['cpu_s']:.2f} CPU s"
        assert cost["peak"] < AMPLIFICATION_PEAK_BYTES, f"{what} peaked at {cost['peak']:,} bytes"
        assert cost["kept"] < AMPLIFICATION_KEPT_BYTES, f"{what} left {cost['kept']:,} bytes allocated"
        assert cost["result_bytes"] < AMPLIFICATION_RESULT_BYTES, cost["error"]


def _amplification_costs() -> None:
    """In a child process: put every amplification body, at each of ``AMPLIFICATION_SIZES``, through a
    processor twice (the second time under tracemalloc) and print, as JSON on the last line, the CPU time of
    the first, the peak and kept allocations of the second and the rejected result, for each kind."""
    logging.disable(logging.CRITICAL)  # the rejections' warnings are not measured
    costs: dict[str, list[dict[str, Any]]] = {}
    for name in sorted(AMPLIFICATION):
        sink = ListSink()
        processor = Processor(_NoBackend(), ResultStore(f"memory://amp-{uuid.uuid4().hex}"), sink,  # type: ignore[arg-type]
                              JobRegistry(), SchedulerMetrics())
        costs[name] = []
        for size in AMPLIFICATION_SIZES:
            body = AMPLIFICATION[name](f"amp-{size}", size)
            started = time.process_time()
            decision = processor.process(Delivery(f"m-{size}", body, {}, 1, None))
            cpu_s = time.process_time() - started
            gc.collect()
            tracemalloc.start()
            try:
                processor.process(Delivery(f"m-{size}-again", body, {}, 1, None))
                peak = tracemalloc.get_traced_memory()[1]
                gc.collect()
                kept = tracemalloc.get_traced_memory()[0]
            finally:
                tracemalloc.stop()
            result = sink.published[-1]
            costs[name].append({
                "size": size, "bytes": len(body), "cpu_s": cpu_s, "peak": peak, "kept": kept,
                "settle": decision.settle.value, "reason": decision.reason, "status": result.status.value,
                "result_bytes": len(result.model_dump_json()), "error": str(result.error)})
    print(json.dumps(costs))


@pytest.mark.slow  # a child process parses 1,200 fuzzed bodies, a few at the size limit: seconds
@pytest.mark.timeout(300)
def test_a_thousand_rejected_requests_leave_memory_flat() -> None:
    growth = _in_a_child("_rejection_growth")
    assert growth["bytes"] < LEAK_BOUND_BYTES, (
        f"{LEAK_MESSAGES:,} rejected requests kept {growth['bytes']:,} bytes; most at:\n{growth['top']}")


def _rejection_growth() -> None:
    """In a child process: run the fuzz corpus through a processor and print, as JSON on the last line, what
    ``LEAK_MESSAGES`` rejections left allocated after the warm-up, and the lines that allocated most of it."""
    logging.disable(logging.CRITICAL)  # one warning per rejection would only fill the pipe
    sink = ListSink()
    processor = Processor(_NoBackend(), ResultStore(f"memory://leak-{uuid.uuid4().hex}"), sink,  # type: ignore[arg-type]
                          JobRegistry(), SchedulerMetrics())

    def reject(messages: Sequence[FuzzMessage], prefix: str) -> None:
        for message in messages:
            delivery = Delivery(f"{prefix}{message.index}", message.data, message.attributes, 1, None)
            decision = processor.process(delivery)
            assert decision.settle is Settle.ACK, (message.kind, decision.reason)
            sink.published.clear()  # what the sink keeps is the test's, not the processor's

    reject(_small(corpus(2 * LEAK_WARM_UP, "warm", seed=1))[:LEAK_WARM_UP], "w")
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    reject(_small(corpus(2 * LEAK_MESSAGES, "leak"))[:LEAK_MESSAGES], "m")
    gc.collect()
    after = tracemalloc.take_snapshot()
    top = "\n".join(str(stat) for stat in after.compare_to(before, "lineno")[:5])
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    print(json.dumps({"bytes": grown, "top": top}))


def _small(messages: Sequence[FuzzMessage]) -> list[FuzzMessage]:
    """The messages of at most ``LEAK_BODY_BYTES``: the bodies at the size limit would take minutes under
    tracemalloc on a loaded machine, and what one of them keeps is bounded on its own (the amplification test)."""
    return [m for m in messages if len(m.data) <= LEAK_BODY_BYTES]


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    local = LocalPlatform(tmp_path_factory.mktemp("fuzz"), LocalConfig(
        port=0, emulator_port=0, workers=1, scheduler_env={"GPURT_MAX_IN_FLIGHT": IN_FLIGHT}))
    local.up()
    yield local
    local.down(drain_timeout_s=0, grace_s=STOP_GRACE_S)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_sample_of_every_kind_gets_one_rejected_result_on_its_first_delivery(platform: LocalPlatform) -> None:
    messages = corpus(SAMPLE, "fuzz")
    # the sample stands for the whole corpus only if it holds every kind, bare messages and the reported body
    assert {m.kind for m in messages} == {*KINDS, "oversize"}
    assert any(not m.attributes for m in messages) and any(m.data == ISSUE_BODY for m in messages)
    lock = threading.Lock()
    seen: dict[str, list[JobResult]] = defaultdict(list)

    def on_any(result: JobResult) -> None:
        with lock:
            seen[result.job_id].append(result)

    clients = platform.pubsub()
    try:
        with ResultCollector(clients, on_any=on_any) as collector:
            topic = clients.topic(contract.REQUEST_TOPIC)
            futures = [clients.publisher.publish(topic, m.data, **m.attributes) for m in messages]
            owner = _owners(messages, [f.result(timeout=120) for f in futures])
            _wait_for(lambda: _results(seen, lock) >= SAMPLE, RESULTS_TIMEOUT_S, lambda: _results(seen, lock))
            collector.wait(set(), 2.0)  # a duplicate or a redelivery's second result would land now

            after = JobRequest.model_validate({"job_id": "fuzz-after", "type": "noop"})
            data, attributes = after.to_message()
            clients.publisher.publish(topic, data, **attributes).result(30)
            assert collector.wait({"fuzz-after"}, 60)["fuzz-after"].status is JobStatus.SUCCEEDED
        with lock:
            fuzzed = {job_id: found for job_id, found in seen.items() if job_id != "fuzz-after"}
        per_message: dict[int, list[JobResult]] = defaultdict(list)
        for job_id, found in fuzzed.items():
            assert job_id in owner, f"a result for {job_id}, which no fuzzed message names"
            per_message[owner[job_id]].extend(found)
        _assert_one_rejection_each(messages, per_message)
        # every message acked on its first delivery: none left leased, none waiting out a redelivery backoff
        # (which would return it only after contract.RETRY_MIN_BACKOFF_S, long after the results above)
        _wait_for(lambda: _request_backlog(platform) == (0, 0), BACKLOG_TIMEOUT_S,
                  lambda: _request_backlog(platform), "(undelivered, outstanding) request messages")
        assert DeadLetterQueue(clients).list(limit=5) == []
    finally:
        clients.close()
    status = platform.status()
    assert status.running and status.healthy and status.ready, status.problems  # the consumer stayed up


def _owners(messages: Sequence[FuzzMessage], message_ids: Sequence[str]) -> dict[str, int]:
    """Which message each possible result names: the body's job id, or invalid-<message id> when the body
    has no usable one; never the attribute's (the forged_attribute kind names a victim there)."""
    owner = {f"invalid-{mid}": m.index for mid, m in zip(message_ids, messages, strict=True)}
    owner.update({f"fuzz-{m.index}": m.index for m in messages})
    return owner


def _assert_one_rejection_each(messages: Sequence[FuzzMessage], per_message: dict[int, list[JobResult]]) -> None:
    """Every message has exactly one result: rejected as invalid, on its first delivery."""
    assert sorted(per_message) == list(range(len(messages))), "messages without a result"
    kinds_twice = {messages[i].kind for i, found in per_message.items() if len(found) != 1}
    assert not kinds_twice, f"messages with more than one result, of kinds {kinds_twice}"
    issue = next(m.index for m in messages if m.data == ISSUE_BODY)
    assert per_message[issue][0].status is JobStatus.REJECTED and per_message[issue][0].attempt == 1
    results = [found[0] for found in per_message.values()]
    assert {r.status for r in results} == {JobStatus.REJECTED}
    assert all(r.error is not None and r.error.kind is ErrorKind.INVALID for r in results)
    assert {r.attempt for r in results} == {1}, "a malformed message was delivered more than once"


def _results(seen: dict[str, list[JobResult]], lock: threading.Lock) -> int:
    """How many results have arrived; under the lock, since the subscriber's threads add to ``seen``."""
    with lock:
        return sum(len(found) for found in seen.values())


def _request_backlog(platform: LocalPlatform) -> tuple[int, int]:
    """The request subscription's (undelivered, outstanding) messages, from the emulator's admin view."""
    stats = platform.status().subscriptions[contract.REQUEST_SUBSCRIPTION]
    return stats["undelivered"], stats["outstanding"]


def _wait_for(done: Callable[[], bool], timeout_s: float, found: Callable[[], object],
              what: str = f"results of {SAMPLE}") -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"{found()} {what} after {timeout_s:.0f} s")
        time.sleep(0.2)
