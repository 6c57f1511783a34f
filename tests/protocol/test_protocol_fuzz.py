"""10,000 malformed requests through the real client to the local platform: each rejected once, at once.

The corpus (``fuzz_corpus``) mixes every malformed kind: random bytes, truncation, nesting bombs,
NaN/Infinity/1e400, huge integers, duplicate keys, invalid UTF-8, UTF-16/32, lone surrogates, wrong
types, unknown types, bad params, oversize bodies, bodies built to be slow to parse (up to the size
limit), and bodies published under another job's ``job_id`` attribute, which must get no result. None
runs Dask work, so the platform rejects them at the consumer's pace. Published with google-cloud-pubsub
(batched), collected with the project's ``ResultCollector`` on a private subscription of the result topic.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator

import pytest

from client.transport import ResultCollector
from local_platform.platform import LocalConfig, LocalPlatform
from ops.dlq import DeadLetterQueue
from protocol import contract
from protocol.messages import ErrorKind, JobRequest, JobResult, JobStatus
from tests.protocol.fuzz_corpus import ISSUE_BODY, corpus

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

MESSAGES = 10_000  # the issue's bar: at least ten thousand
RESULTS_TIMEOUT_S = 240.0  # a loaded 2-core box rejects a few hundred messages a second
STOP_GRACE_S = 3.0  # the platform is thrown away afterwards
# Messages the consumer holds at once. Rejections never reach Dask, so the GPU slots that normally bound
# this (two local workers) would only make the test slow; one worker runs the normal job afterwards.
IN_FLIGHT = "16"


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    local = LocalPlatform(tmp_path_factory.mktemp("fuzz"), LocalConfig(
        port=0, emulator_port=0, workers=1, scheduler_env={"GPURT_MAX_IN_FLIGHT": IN_FLIGHT}))
    local.up()
    yield local
    local.down(drain_timeout_s=0, grace_s=STOP_GRACE_S)


def test_every_fuzzed_message_gets_one_rejected_result_on_its_first_delivery(platform: LocalPlatform) -> None:
    messages = corpus(MESSAGES, "fuzz")
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
            message_ids = [f.result(timeout=120) for f in futures]
            # A result names the body's job id, or invalid-<message id> when the body has no usable one; never
            # the attribute's (the forged_attribute kind names a victim there).
            owner = {f"invalid-{mid}": m.index for mid, m in zip(message_ids, messages, strict=True)}
            owner.update({f"fuzz-{m.index}": m.index for m in messages})
            _wait_for(lambda: _results(seen, lock) >= MESSAGES, RESULTS_TIMEOUT_S, lambda: _results(seen, lock))
            collector.wait(set(), 2.0)  # a duplicate or a redelivery's second result would land now

            after = JobRequest.model_validate({"job_id": "fuzz-after", "type": "noop"})
            clients.publisher.publish(topic, after.model_dump_json().encode(), **after.attributes()).result(30)
            assert collector.wait({"fuzz-after"}, 60)["fuzz-after"].status is JobStatus.SUCCEEDED
        with lock:
            fuzzed = {job_id: found for job_id, found in seen.items() if job_id != "fuzz-after"}
        per_message: dict[int, list[JobResult]] = defaultdict(list)
        for job_id, found in fuzzed.items():
            assert job_id in owner, f"a result for {job_id}, which no fuzzed message names"
            per_message[owner[job_id]].extend(found)
        assert sorted(per_message) == list(range(MESSAGES)), "messages without a result"
        kinds_twice = {messages[i].kind for i, found in per_message.items() if len(found) != 1}
        assert not kinds_twice, f"messages with more than one result, of kinds {kinds_twice}"
        issue = next(m.index for m in messages if m.data == ISSUE_BODY)
        assert per_message[issue][0].status is JobStatus.REJECTED and per_message[issue][0].attempt == 1
        results = [found[0] for found in per_message.values()]
        assert {r.status for r in results} == {JobStatus.REJECTED}
        assert all(r.error is not None and r.error.kind is ErrorKind.INVALID for r in results)
        assert {r.attempt for r in results} == {1}, "a malformed message was delivered more than once"
        assert DeadLetterQueue(clients).list(limit=5) == []
    finally:
        clients.close()
    status = platform.status()
    assert status.running and status.healthy and status.ready, status.problems  # the consumer stayed up


def _results(seen: dict[str, list[JobResult]], lock: threading.Lock) -> int:
    """How many results have arrived; under the lock, since the subscriber's threads add to ``seen``."""
    with lock:
        return sum(len(found) for found in seen.values())


def _wait_for(done: Callable[[], bool], timeout_s: float, count: Callable[[], int]) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"only {count()} of {MESSAGES} results after {timeout_s:.0f} s")
        time.sleep(0.2)
