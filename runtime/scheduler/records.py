"""Typed records that cross threads: a received delivery, the decision on it, a job in flight, a job started,
a job concluding."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import cached_property

from runtime.protocol.messages import InvalidRequest, JobRequest, JobResult, parse_request
from runtime.protocol.queues import DEFAULT_QUEUE


@dataclass(frozen=True)
class Delivery:
    """One delivery of a request message, detached from the Pub/Sub client's message object."""

    message_id: str
    data: bytes
    attributes: dict[str, str]
    delivery_attempt: int
    publish_time: datetime | None
    queue: str = DEFAULT_QUEUE  # the request queue it arrived on: who sent it (runtime.protocol.queues)

    @cached_property
    def request(self) -> JobRequest | InvalidRequest:
        """The body parsed, or why it is no request: parsed on first use and kept, so that the packing check
        and the processor read one parse (a body at the size limit costs a few hundred milliseconds)."""
        try:
            return parse_request(self.data)
        except InvalidRequest as exc:
            reason, job_id = str(exc), exc.job_id
        # Kept is only the rendered reason, in an exception never raised: the one caught holds a traceback,
        # whose frames reach back to this delivery, and whatever they hold stays as long as the delivery does.
        return InvalidRequest(reason, job_id)


class Settle(StrEnum):
    """What to tell Pub/Sub about a delivery."""

    ACK = "ack"  # done: a terminal result is stored and published (or the message is a duplicate)
    NACK = "nack"  # redeliver (with backoff) or, at the last attempt, dead-letter


@dataclass(frozen=True)
class Decision:
    """The outcome of processing one delivery."""

    settle: Settle
    job_id: str | None
    result: JobResult | None = None
    reason: str = ""


@dataclass
class InFlight:
    """A job this replica is running now."""

    request: JobRequest
    attempt: int
    started_at: datetime
    done: threading.Event = field(default_factory=threading.Event)
    cancel_requested: bool = False


@dataclass(frozen=True)
class Conclusion:
    """A delivery whose job has run, its result still to be stored, published and settled.

    The slot that ran the job hands this to a concluding thread and takes its next job at once, so the
    worker does not wait for the bookkeeping (docs/scheduler.md, "Pipelining"); the processor's ``finish``
    concludes one or a pack of them. ``result`` builds the result (storing the job's artifacts first);
    ``settle`` and ``reason`` say how the message is settled once the result is out (a last attempt's
    ``failed`` is nacked, to dead-letter it); ``done`` runs at the very end (the job leaves the registry).
    """

    job_id: str
    result: Callable[[], JobResult]
    settle: Settle = Settle.ACK
    reason: str | None = None
    done: Callable[[], None] = field(default=lambda: None)


def _no_wake_up(callback: Callable[[], None]) -> None:
    """A ``Started`` that is not in flight never becomes ready on its own: nobody is called back."""


@dataclass(frozen=True)
class Started:
    """Deliveries whose jobs have started: ``outcomes`` waits for their runs and gives one outcome per delivery.

    ``in_flight``: a task is on its way to a worker, so the slot may take its next message before waiting
    for this one (docs/scheduler.md, "Submit ahead"); otherwise ``outcomes`` runs the jobs, or waits, there
    and then. ``ready`` says whether ``outcomes`` would return without waiting for a worker (the jobs
    ended, or their time is up); ``on_ready`` asks to be called (from any thread) once they end;
    ``start_clock`` starts their timeout (their turn on the slot has come) and gives its deadline
    (``time.monotonic``), by which ``ready`` is true.
    """

    outcomes: Callable[[], list[Decision | Conclusion]]
    in_flight: bool = False
    ready: Callable[[], bool] = field(default=lambda: False)
    on_ready: Callable[[Callable[[], None]], None] = field(default=_no_wake_up)
    start_clock: Callable[[], float] = field(default=lambda: math.inf)
