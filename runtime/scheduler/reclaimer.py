"""The DLQ reclaimer (leader only): every dead-lettered job ends with a terminal result.

The consumer publishes ``failed`` at a job's last attempt, so normally there is nothing to do. If a
replica died during that last attempt, the message dead-letters with no result; the reclaimer finds
it, stores and publishes ``failed``. If the last attempt stored ``failed`` but its publish failed, the
reclaimer publishes the stored result. Either way it releases the message again *without acking it*:
it stays in the DLQ for ``gpurt dlq replay``. The DLQ subscription has no dead-letter policy of its own, so
releasing costs nothing.

A dead letter's job is the one its body names, and only once the body validates as a request: the
``job_id`` attribute is set by the publisher independently of the body and never checked against it, so
trusting it would let one request store and publish ``failed`` for another job, which then never runs
(docs/scheduler.md, "Whose result is it"). A body that does not validate names no job: the reclaimer
publishes nothing for it and logs it once; it stays in the DLQ, counted by the DLQ depth metric, for
``gpurt dlq list`` and ``gpurt dlq replay`` (which sends it through the consumer, whose answer is
``rejected``).

Only a message Pub/Sub itself dead-lettered from a request queue's subscription (``runtime.protocol.queues``: the
default, urgent and desk queues share the dead-letter topic) is answered: it carries the service's dead-letter
attributes naming that subscription and its project. Anything else on the topic (a
message published straight to ``gpu-job-request-dlq``) is refused like an invalid body: logged once, left
there, never answered, so it cannot store ``failed`` for a job whose own request would then never run. On
Google Cloud only the Pub/Sub service agent may publish to the topic (docs/scheduler.md, "Who may publish
where"); the attributes check keeps a stray or forged message out where that grant is missing or locally.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from runtime.protocol import contract
from runtime.protocol.messages import ErrorKind, InvalidRequest, JobStatus, parse_request
from runtime.protocol.queues import BUILT_IN_QUEUES, QueueSpec
from runtime.pubsub.admin import subscription_path
from runtime.pubsub.publisher import ResultSink
from runtime.scheduler.outcome import ended_result
from runtime.scheduler.store import ResultStore

# Dead letters looked at per run; a storm is worked through over several runs.
BATCH: Final = 100
# A pull on an empty DLQ waits for messages until its deadline: keep the wait short, empty is the norm.
PULL_TIMEOUT_S: Final = 5.0
# Invalid dead letters already logged, by message id: each run sees them again until they are replayed.
# Past this many the memory is cleared (and they are logged once more) rather than growing without end.
MAX_REPORTED: Final = 10_000

log = logging.getLogger(__name__)


class DlqReclaimer:
    """One ``run()`` reads a batch of dead letters; each ends with a published terminal result."""

    def __init__(self, subscriber: Any, project: str, store: ResultStore, sink: ResultSink,
                 queues: Sequence[QueueSpec] = BUILT_IN_QUEUES) -> None:
        """``queues``: the request queues the scheduler consumes (``GPURT_QUEUES``), whose dead letters it answers."""
        self._subscriber = subscriber
        self._sources = {queue.subscription for queue in queues}
        self._subscription = subscription_path(project, contract.REQUEST_DLQ_SUBSCRIPTION)
        self._project = project
        self._store = store
        self._sink = sink
        self._reported: set[str] = set()

    def run(self) -> list[str]:
        """Reclaim one batch; returns the job ids whose result was published now."""
        from google.api_core.exceptions import DeadlineExceeded

        try:
            response = self._subscriber.pull(
                request={"subscription": self._subscription, "max_messages": BATCH}, timeout=PULL_TIMEOUT_S
            )
        except DeadlineExceeded:
            return []  # nothing dead-lettered
        received = list(response.received_messages)
        reclaimed: list[str] = []
        try:
            for item in received:
                if item.message.message_id in self._reported:
                    continue  # known not to be a request: not parsed again every run
                if (refused := self._not_dead_lettered(item.message.attributes)) is not None:
                    self._report_invalid(item.message, refused)
                    continue
                try:
                    request = parse_request(item.message.data)
                except InvalidRequest as exc:
                    self._report_invalid(item.message, exc)
                    continue
                job_id = request.job_id
                stored = self._store.get(job_id)
                if stored is not None:
                    if not self._store.is_published(job_id):
                        # The last attempt stored `failed` but could not publish it (and nacked): send it now.
                        self._sink.publish_result(stored)
                        self._store.mark_published(job_id)
                        reclaimed.append(job_id)
                    continue
                result = ended_result(request, JobStatus.FAILED, ErrorKind.TRANSIENT,
                                      "dead-lettered without a result (found by the reclaimer)",
                                      attempt=max(1, item.delivery_attempt or contract.MAX_DELIVERY_ATTEMPTS),
                                      ).answering(item.message.data, None)  # a dead letter has an id of its own
                self._store.put(result)
                self._sink.publish_result(result)
                self._store.mark_published(job_id)
                reclaimed.append(job_id)
                log.warning("reclaimed a dead-lettered job without a result", extra={"job_id": job_id})
        finally:
            if received:
                self._subscriber.modify_ack_deadline(request={
                    "subscription": self._subscription,
                    "ack_ids": [item.ack_id for item in received],
                    "ack_deadline_seconds": 0,
                })
        return reclaimed

    def _not_dead_lettered(self, attributes: Mapping[str, str]) -> str | None:
        """Why a message on the dead-letter topic was not dead-lettered by Pub/Sub from a request queue's
        subscription, or None when it was (its source attributes name one, by id or full name, and the project)."""
        source = attributes.get(contract.DEAD_LETTER_SOURCE_SUBSCRIPTION, "")
        project = attributes.get(contract.DEAD_LETTER_SOURCE_PROJECT, "")
        if source.rsplit("/", 1)[-1] in self._sources and project == self._project:
            return None
        return (f"not dead-lettered from a request queue's subscription ({', '.join(sorted(self._sources))}; "
                f"attributes "
                f"{contract.DEAD_LETTER_SOURCE_SUBSCRIPTION}={source[:200]!r}, "
                f"{contract.DEAD_LETTER_SOURCE_PROJECT}={project[:200]!r})")

    def _report_invalid(self, message: Any, exc: InvalidRequest | str) -> None:
        """Log a dead letter that is no valid request, once per message while it stays in the DLQ."""
        if message.message_id in self._reported:
            return
        if len(self._reported) >= MAX_REPORTED:
            self._reported.clear()
        self._reported.add(message.message_id)
        log.warning("a dead letter is not a valid request or not Pub/Sub's; no result is published for it "
                    "(replay it to have it rejected or run): %s", exc, extra={"message_id": message.message_id})
