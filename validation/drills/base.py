"""What every drill shares: its result record, the platform handles it works with, and small polling helpers."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pydantic import BaseModel, Field, SerializeAsAny

from runtime.access.control_api import ApiClient
from runtime.access.local_state import LocalState
from runtime.protocol import contract
from validation.adapters.pubsub import GooglePubSubAdmin
from validation.drills import DEFAULT_LOAD_JOBS, DEFAULT_STORE_OUTAGE_S
from validation.platform import DrillPlatform

# Between two looks at a condition the drill waits for (seconds): quick to notice, light on the API.
POLL_S = 0.25


class DrillFailed(Exception):
    """The drill saw the platform misbehave; the message is the finding."""


class DrillResult(BaseModel):
    """A drill's outcome and the evidence it collected along the way."""

    name: str
    passed: bool
    evidence: list[str] = Field(default_factory=list)
    failure: str | None = None
    duration_s: float = 0.0
    details: list[SerializeAsAny[BaseModel]] = Field(default_factory=list)  # per-item records (the alert drill's)
    figures: dict[str, float | int | str | None] = Field(
        default_factory=dict, description="Measured figures of a load drill (chaos), by name.")


@dataclass
class DrillContext:
    """Handles on a running local platform, shared by the drills of one run (the CLI passes the real
    ``LocalPlatform`` in as ``platform``)."""

    platform: DrillPlatform
    timeout_s: float
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    evidence: list[str] = field(default_factory=list)
    details: list[BaseModel] = field(default_factory=list)
    on_step: Callable[[str], None] = lambda message: None
    jobs: int = DEFAULT_LOAD_JOBS  # size of a load drill's load (chaos --jobs)
    store_outage_s: float = DEFAULT_STORE_OUTAGE_S  # the chaos drill's long store outage (--store-outage)
    figures: dict[str, float | int | str | None] = field(default_factory=dict)

    @property
    def state(self) -> LocalState:
        """The platform's current state (re-read: a drill may restart a process)."""
        return self.platform.running_state()

    @property
    def directory(self) -> Path:
        """The platform's state folder."""
        return self.platform.directory

    def api(self) -> ApiClient:
        """An authenticated scheduler API client (use with ``with``)."""
        state = self.state
        return ApiClient(state.api_url, state.control_token)

    def pubsub(self) -> GooglePubSubAdmin:
        """Pub/Sub admin on the platform's emulator."""
        state = self.state
        return GooglePubSubAdmin.for_emulator(state.emulator_host, state.project, state.broker_token)

    @contextlib.contextmanager
    def first_replica_only(self) -> Iterator[None]:
        """Drain every scheduler replica but the first (whose API ``api()`` reaches) while the block runs.

        A drill that watches jobs in flight and counts retries through one API needs its jobs to land on
        that replica; the others take no new job meanwhile and resume afterwards. Each is drained alone
        (``replica_only``): the platform-wide mode would drain the first replica too.
        """
        state = self.state
        others = state.schedulers()[1:]
        for record in others:
            with ApiClient(record.api_url or "", state.control_token) as api:
                api.set_maintenance("drain", replica_only=True)
        try:
            yield
        finally:
            current = self.platform.state
            for record in current.schedulers()[1:] if current else []:
                with ApiClient(record.api_url or "", current.control_token) as api:
                    api.set_maintenance("normal", replica_only=True)

    def job_id(self, drill: str, index: int) -> str:
        """A job id unique to this run, so drills never collide with earlier results in the store."""
        return f"drill-{drill}-{self.run_id}-{index}"

    def note(self, message: str) -> None:
        """Record one piece of evidence and show it as progress."""
        self.evidence.append(message)
        self.on_step(message)


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Poll ``predicate`` until true; returns the seconds it took, raises ``DrillFailed`` naming ``what``."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout_s:
            raise DrillFailed(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(POLL_S)
    return time.monotonic() - start


def in_flight(api: ApiClient) -> list[str]:
    """Job ids running on the scheduler now."""
    running = api.status().get("in_flight", [])
    return list(running) if isinstance(running, list) else []


def counter(api: ApiClient, name: str) -> float:
    """The sum over labels of counter ``name`` (``..._total``) in ``GET /metrics``."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{api.base_url}/metrics", timeout=5.0).text
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == name)


def counter_all(ctx: DrillContext, name: str) -> float:
    """Counter ``name`` summed over every scheduler replica (each process counts its own)."""
    state = ctx.state
    total = 0.0
    for record in state.schedulers():
        with ApiClient(record.api_url or "", state.control_token) as api:
            total += counter(api, name)
    return total


# Dead letters looked at per pull when a drill takes its own out of the DLQ, and how long an empty pull waits.
DLQ_PULL: Final = 100
DLQ_PULL_WAIT_S: Final = 2.0


def take_dead_letters(ctx: DrillContext, job_ids: set[str]) -> int:
    """Acknowledge the messages on the request dead-letter subscription whose ``job_id`` attribute is one of
    ``job_ids`` (a drill's own); release the others. Returns how many were taken."""
    pubsub = ctx.pubsub()
    subscription = contract.REQUEST_DLQ_SUBSCRIPTION
    found, others = 0, []
    while messages := pubsub.pull(subscription, DLQ_PULL, timeout_s=DLQ_PULL_WAIT_S):
        mine = [m.ack_id for m in messages if m.attributes.get("job_id") in job_ids]
        pubsub.acknowledge(subscription, mine)
        found += len(mine)
        others += [m.ack_id for m in messages if m.ack_id not in mine]  # held by us until released below
    pubsub.release(subscription, others)
    return found
