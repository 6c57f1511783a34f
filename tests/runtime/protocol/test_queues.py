"""The queue contract: names built from one rule, declarations checked, the scheduler's env round-trips."""

from __future__ import annotations

import pytest

from runtime.protocol import contract, queues
from runtime.protocol.queues import QueueError, QueueSpec


def test_the_built_in_queues_keep_the_topics_the_contract_names() -> None:
    default, urgent = queues.with_built_ins(())
    assert (default.topic, default.subscription) == (contract.REQUEST_TOPIC, contract.REQUEST_SUBSCRIPTION)
    assert (urgent.topic, urgent.subscription) == (contract.URGENT_REQUEST_TOPIC, contract.URGENT_REQUEST_SUBSCRIPTION)
    assert urgent.urgent and not default.urgent
    assert default.subscription_spec() is contract.REQUEST_SUBSCRIPTION_SPEC
    assert urgent.subscription_spec() is contract.URGENT_REQUEST_SUBSCRIPTION_SPEC


def test_a_desk_queue_gets_its_own_topic_and_the_request_subscriptions_dead_lettering() -> None:
    spec = QueueSpec("rates-desk", weight=3, max_slots=4).subscription_spec()
    assert (spec.name, spec.topic) == ("gpu-job-request-rates-desk-sub", "gpu-job-request-rates-desk")
    assert spec.dead_letter_topic == contract.REQUEST_DLQ_TOPIC
    assert spec.max_delivery_attempts == contract.MAX_DELIVERY_ATTEMPTS
    assert spec.ack_deadline_s == contract.ACK_DEADLINE_S


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"name": "Rates"}, "DNS label"),
    ({"name": "r" * 31}, "DNS label"),
    ({"name": "rates", "weight": 0}, "between 1 and"),
    ({"name": "rates", "max_slots": 0}, "at least 1"),
    ({"name": "urgent", "weight": 2}, "neither a weight nor a cap"),
    ({"name": "dlq"}, "is taken"),  # issue #45: its topic would be the dead-letter topic
])
def test_a_bad_declaration_is_refused_with_its_reason(kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(QueueError, match=words):
        QueueSpec(**kwargs)  # type: ignore[arg-type]


def test_declared_queues_sit_between_default_and_urgent_and_default_may_be_tuned() -> None:
    declared = (QueueSpec("rates"), QueueSpec("default", weight=5, max_slots=2))
    assert [q.name for q in queues.with_built_ins(declared)] == ["default", "rates", "urgent"]
    assert queues.with_built_ins(declared)[0] == QueueSpec("default", 5, 2)
    with pytest.raises(QueueError, match="more than once: rates"):
        queues.with_built_ins((QueueSpec("rates"), QueueSpec("rates", weight=2)))


def test_the_scheduler_env_round_trips_and_refuses_what_it_cannot_read() -> None:
    declared = queues.with_built_ins((QueueSpec("rates", 2), QueueSpec("credit", 1, 8)))
    assert queues.decode(queues.encode(declared)) == declared
    assert queues.decode("[]") == queues.BUILT_IN_QUEUES
    for text, words in (("{", "not JSON"), ('{"name": "x"}', "JSON list"),
                        ('[{"name": "x", "cap": 1}]', "unknown keys"), ('[{"name": "x", "weight": "2"}]', "whole"),
                        ('[{"name": "x", "weight": true}]', "whole")):
        with pytest.raises(QueueError, match=words):
            queues.decode(text)


def test_the_topology_adds_a_topic_and_subscription_per_queue_the_contract_lacks_and_nothing_twice() -> None:
    topics, subscriptions = queues.topology(queues.with_built_ins((QueueSpec("rates"),)))
    assert {t.name for t in topics} >= {*(t.name for t in contract.TOPICS), "gpu-job-request-rates",
                                        contract.URGENT_REQUEST_TOPIC}
    assert {s.name for s in subscriptions} >= {*(s.name for s in contract.SUBSCRIPTIONS), "gpu-job-request-rates-sub",
                                               contract.URGENT_REQUEST_SUBSCRIPTION}
    assert len({t.name for t in topics}) == len(topics)
    assert len({s.name for s in subscriptions}) == len(subscriptions)
