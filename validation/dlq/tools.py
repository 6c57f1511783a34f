"""List, inspect and replay the dead-letter queue (docs/runbooks/dlq-storm.md).

All three read ``gpu-job-request-dlq-sub`` with synchronous pulls through the real Pub/Sub client.
Listing holds every message it pulled until it has seen them all, then releases them (ack deadline 0),
so a listing never consumes a message. A replay republishes a dead letter to the topic of the queue it was
dead-lettered from (its ``CloudPubSubDeadLetterSourceSubscription``; ``gpu-job-request`` when it has none), so a
desk's job goes back to that desk's queue, and acks it only after that succeeded; a message whose publish fails,
or whose source is no request queue, stays on the DLQ.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from runtime.protocol.contract import REPLAY_ATTRIBUTE, REQUEST_DLQ_SUBSCRIPTION
from validation.dlq.messages import DeadLetter, from_received

if TYPE_CHECKING:
    from runtime.access.transport import PubSubClients

REPLAYED_FROM_ATTRIBUTE: Final = "replayed_from"  # the DLQ message id a replayed request came from
PULL_BATCH: Final = 100  # messages per pull call
# A pull that finds nothing returns empty or times out; both mean "drained". The first pull waits longer
# (Pub/Sub may take a moment to offer messages); once messages flow, a short wait tells the end quickly.
FIRST_PULL_TIMEOUT_S: Final = 3.0
NEXT_PULL_TIMEOUT_S: Final = 1.0
# A listing holds what it pulled; this keeps a DLQ storm from pulling millions of messages into memory.
MAX_SCAN: Final = 10_000


@dataclass
class _Held:
    ack_id: str
    data: bytes  # the exact bytes, so a replay republishes what was sent even if it is not UTF-8
    letter: DeadLetter


@dataclass
class ReplayReport:
    """What a replay did: DLQ message id -> new request message id, and DLQ message id -> error."""

    replayed: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


class DeadLetterQueue:
    """The DLQ tools over one project's Pub/Sub (emulator or real)."""

    def __init__(self, clients: PubSubClients, subscription: str = REQUEST_DLQ_SUBSCRIPTION) -> None:
        self._clients = clients
        self._subscription = clients.subscription(subscription)

    def list(self, limit: int = 50) -> list[DeadLetter]:
        """Up to ``limit`` dead letters, none consumed."""
        held = self._pull(limit)
        self._release(held)
        return [h.letter for h in held]

    def inspect(self, key: str) -> DeadLetter | None:
        """The dead letter whose message id or job id is ``key`` (None if absent); none consumed."""
        held = self._pull(MAX_SCAN)
        self._release(held)
        return next((h.letter for h in held if key in (h.letter.message_id, h.letter.job_id)), None)

    def replay(self, sample: int | None = None) -> ReplayReport:
        """Republish ``sample`` dead letters (all when None) to their source queue's topic, acking each after its
        publish."""
        from runtime.pubsub.publisher import TopicPublisher

        publisher = TopicPublisher(self._clients.publisher, self._clients.project)
        report = ReplayReport()
        for item in self._pull(sample if sample is not None else MAX_SCAN):
            attributes = {**item.letter.replay_attributes(), REPLAY_ATTRIBUTE: "1",
                          REPLAYED_FROM_ATTRIBUTE: item.letter.message_id}
            try:
                queue = item.letter.source_queue()
                new_id = publisher.publish_raw_request(item.data, attributes, queue=queue)
            except Exception as exc:  # any publish failure (or no queue to go back to) keeps the letter on the DLQ
                report.failed[item.letter.message_id] = str(exc) or type(exc).__name__
                self._release([item])
                continue
            self._clients.subscriber.acknowledge(request={"subscription": self._subscription,
                                                          "ack_ids": [item.ack_id]})
            report.replayed[item.letter.message_id] = new_id
        return report

    def _pull(self, limit: int) -> list[_Held]:
        from google.api_core.exceptions import DeadlineExceeded

        held: list[_Held] = []
        seen: set[str] = set()
        while len(held) < limit:
            try:
                response = self._clients.subscriber.pull(
                    request={"subscription": self._subscription,
                             "max_messages": min(PULL_BATCH, limit - len(held))},
                    timeout=NEXT_PULL_TIMEOUT_S if held else FIRST_PULL_TIMEOUT_S, retry=None)
            except DeadlineExceeded:
                break
            if not response.received_messages:
                break
            for received in response.received_messages:
                if received.message.message_id in seen:  # redelivered while we were still pulling
                    continue
                seen.add(received.message.message_id)
                held.append(_Held(received.ack_id, bytes(received.message.data), from_received(received)))
        return held

    def _release(self, held: list[_Held]) -> None:
        if not held:
            return
        # Ack deadline 0: the messages are available again at once, untouched.
        with contextlib.suppress(Exception):
            self._clients.subscriber.modify_ack_deadline(request={
                "subscription": self._subscription, "ack_ids": [h.ack_id for h in held], "ack_deadline_seconds": 0})
