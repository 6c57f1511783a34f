"""Whose result is it: a result names the job its validated body names, never the ``job_id`` attribute.

The attacks of the security review, replayed against the real processor and reclaimer over a result
store in memory: a request for job ``atk`` that fails transiently, published with the attribute
``job_id=victim``, must end ``failed`` for ``atk`` alone, and ``victim`` must still run when its own
request comes; a garbage body with the attribute ``job_id=V`` must not publish anything under ``V``.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from runtime.protocol import contract
from runtime.protocol.messages import ErrorKind, JobRequest, JobStatus
from runtime.scheduler.metrics import SchedulerMetrics
from runtime.scheduler.processor import Processor
from runtime.scheduler.reclaimer import DlqReclaimer
from runtime.scheduler.records import Delivery, Settle
from runtime.scheduler.registry import JobRegistry
from runtime.scheduler.store import ResultStore
from tests.runtime.scheduler.test_processor import GatedBackend, ListSink


@dataclass(frozen=True)
class _Message:
    data: bytes
    attributes: dict[str, str]
    message_id: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass(frozen=True)
class _Received:
    message: _Message
    delivery_attempt: int = contract.MAX_DELIVERY_ATTEMPTS
    ack_id: str = field(default_factory=lambda: uuid.uuid4().hex)


class FakeDlq:
    """The DLQ subscription as the reclaimer sees it: every pull returns the same dead letters (released)."""

    def __init__(self, *messages: _Message) -> None:
        self.received = [_Received(m) for m in messages]
        self.released: list[str] = []

    def pull(self, request: dict[str, Any], timeout: float) -> Any:
        return type("Response", (), {"received_messages": list(self.received)})()

    def modify_ack_deadline(self, request: dict[str, Any]) -> None:
        assert request["ack_deadline_seconds"] == 0  # released, never acked
        self.released.extend(request["ack_ids"])


def _noop(job_id: str, **params: Any) -> bytes:
    return JobRequest.model_validate({"job_id": job_id, "type": "noop", "params": params}).model_dump_json().encode()


def _setup() -> tuple[Processor, GatedBackend, ResultStore, ListSink]:
    backend, store, sink = GatedBackend(), ResultStore(f"memory://identity-{uuid.uuid4().hex}"), ListSink()
    return Processor(backend, store, sink, JobRegistry(), SchedulerMetrics()), backend, store, sink


def _reclaim(store: ResultStore, sink: ListSink, *messages: _Message) -> list[str]:
    return DlqReclaimer(FakeDlq(*messages), "p", store, sink).run()


def test_a_transient_failure_sent_under_a_victims_attribute_fails_only_its_own_job() -> None:
    processor, backend, store, sink = _setup()
    backend.fail.add("atk")
    attack = _Message(_noop("atk"), {"job_id": "victim", "type": "noop"})
    for attempt in range(1, contract.MAX_DELIVERY_ATTEMPTS + 1):
        decision = processor.process(Delivery(attack.message_id, attack.data, attack.attributes, attempt, None))
        assert decision.settle is Settle.NACK and decision.job_id == "atk"
    # Dead-lettered; the reclaimer then looks at it, as the leader does every round.
    assert _reclaim(store, sink, attack) == []
    assert store.get("victim") is None
    assert {r.job_id for r in sink.published} == {"atk"}
    # The victim's own request runs, and succeeds.
    victim = processor.process(Delivery("m-victim", _noop("victim"), {"job_id": "victim"}, 1, None))
    assert victim.settle is Settle.ACK and victim.result is not None
    assert victim.result.status is JobStatus.SUCCEEDED and backend.calls[-1] == "victim"


def test_the_reclaimer_names_a_result_less_dead_letter_by_its_body_not_its_attribute() -> None:
    _, _, store, sink = _setup()
    orphan = _Message(_noop("atk"), {"job_id": "victim",  # its replica died at the last attempt: Pub/Sub moved it
                                     contract.DEAD_LETTER_SOURCE_SUBSCRIPTION: contract.REQUEST_SUBSCRIPTION,
                                     contract.DEAD_LETTER_SOURCE_PROJECT: "p"})
    assert _reclaim(store, sink, orphan) == ["atk"]
    assert [(r.job_id, r.status) for r in sink.published] == [("atk", JobStatus.FAILED)]
    assert store.get("victim") is None and store.get("atk") is not None


@pytest.mark.parametrize("body", [
    b"\xff garbage", b"", b'{"job_id": "victim"', b'{"type": "noop"}', b'{"job_id": "abc\\n", "type": "noop"}',
    b'"' + b'\\"' * 1000,
])
def test_an_invalid_dead_letter_gets_no_result_under_its_attribute_and_is_logged_once(
        body: bytes, caplog: pytest.LogCaptureFixture) -> None:
    _, _, store, sink = _setup()
    garbage = _Message(body, {"job_id": "V", "type": "noop"})
    dlq = FakeDlq(garbage)
    reclaimer = DlqReclaimer(dlq, "p", store, sink)
    with caplog.at_level(logging.WARNING, logger="runtime.scheduler.reclaimer"):
        assert reclaimer.run() == [] and reclaimer.run() == []
    assert sink.published == [] and store.get("V") is None
    assert len(dlq.released) == 2  # still in the DLQ, for `gpurt dlq replay`
    assert [r.message_id for r in caplog.records] == [garbage.message_id]


@pytest.mark.parametrize("body", [b"\xff garbage", b'{"type": "noop"}', b'{"job_id": 7, "type": "noop"}',
                                  b'{"job_id": "abc\\n", "type": "noop"}', b"[" * 5000])
def test_a_garbage_body_under_a_victims_attribute_is_rejected_under_its_message_id(body: bytes) -> None:
    processor, backend, _, sink = _setup()
    decision = processor.process(Delivery("m-17", body, {"job_id": "V", "type": "noop"}, 1, None))
    assert decision.settle is Settle.ACK and backend.calls == []
    assert [(r.job_id, r.status) for r in sink.published] == [("invalid-m-17", JobStatus.REJECTED)]
    assert sink.published[0].error is not None and sink.published[0].error.kind is ErrorKind.INVALID


def test_an_invalid_body_that_names_a_well_formed_job_id_is_rejected_under_that_id() -> None:
    processor, _, _, sink = _setup()
    body = b'{"job_id": "mine", "type": "noop", "params": {"sleep_s": -1}}'
    processor.process(Delivery("m-18", body, {"job_id": "V"}, 1, None))
    assert [(r.job_id, r.status) for r in sink.published] == [("mine", JobStatus.REJECTED)]
