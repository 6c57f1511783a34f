"""The deploy probe of the post-deploy checklist: a noop request must come back as a result within 30 seconds.

It is published to the urgent queue's topic with the probe attribute, so it reaches the probe subscription alone
(the urgent subscription's filter leaves it out), which the scheduler consumes on a stream and slot of its own: a
backlog of requests on any queue (load, not breakage) cannot hold it back, and it is answered once.

The result is read on a temporary subscription of the result topic, created before the publish (so the
result cannot slip past) and deleted afterwards, so the probe never steals results from real consumers.

Each run sends the contract's probe with a fresh ``job_id`` (``deploy-probe-<stamp>-<hex>``): the
scheduler treats ``job_id`` as an idempotency key and does not publish a stored result a second time, so
a fixed id would only ever be answered on the first validation after the result store was emptied.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime

from pydantic import ValidationError

from runtime.protocol import contract
from runtime.protocol.messages import JobResult, JobStatus
from validation.adapters.pubsub import PubSubAdmin
from validation.runner import Check, CheckFailed

# One pull waits at most this long (seconds), so the overall deadline is checked often.
PULL_SLICE_S = 2.0
PROBE_SUBSCRIPTION_PREFIX = "gpurt-probe-"


def probe_round_trip(pubsub: PubSubAdmin, timeout_s: float = contract.PROBE_TIMEOUT_S) -> Check:
    """Publish ``contract.PROBE_MESSAGE`` and wait for its result on a temporary subscription."""

    def run() -> str:
        probe = probe_message()
        temp = f"{PROBE_SUBSCRIPTION_PREFIX}{uuid.uuid4().hex[:12]}"
        pubsub.create_subscription(temp, contract.RESULT_TOPIC, ack_deadline_s=60)
        try:
            start = time.monotonic()
            # The probe attribute routes it to the scheduler's probe subscription only, which no request backlog
            # delays (contract.PROBE_SUBSCRIPTION_SPEC).
            pubsub.publish(contract.URGENT_REQUEST_TOPIC, json.dumps(probe).encode(),
                           {"job_id": probe["job_id"], "type": probe["type"], contract.PROBE_ATTRIBUTE: "true"})
            result = _await_result(pubsub, temp, probe["job_id"], start + timeout_s)
            elapsed = time.monotonic() - start
        finally:
            pubsub.delete_subscription(temp)
        if result is None:
            raise CheckFailed(
                f"no result for {probe['job_id']} on {contract.RESULT_TOPIC} within {timeout_s:.0f}s",
                "the scheduler is not consuming: check scheduler.healthz, maintenance mode "
                "(`gpurt maintenance status`) and the scheduler log")
        if result.status is not JobStatus.SUCCEEDED:
            raise CheckFailed(f"{probe['job_id']} came back {result.status.value}: {result.error}",
                              "the scheduler runs but cannot execute jobs: check Dask workers and its log")
        return f"{probe['job_id']} {result.status.value} in {elapsed:.1f}s (attempt {result.attempt})"

    return Check("probe.round-trip", run)


def probe_message() -> dict[str, str]:
    """The contract's probe message with a job id unique to this run."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return {**contract.PROBE_MESSAGE, "job_id": f"{contract.PROBE_MESSAGE['job_id']}-{stamp}-{uuid.uuid4().hex[:6]}"}


def _await_result(pubsub: PubSubAdmin, subscription: str, job_id: str, deadline: float) -> JobResult | None:
    while time.monotonic() < deadline:
        messages = pubsub.pull(subscription, 10, timeout_s=min(PULL_SLICE_S, max(0.1, deadline - time.monotonic())))
        pubsub.acknowledge(subscription, [m.ack_id for m in messages])
        for message in messages:
            try:
                result = JobResult.model_validate_json(message.data)
            except ValidationError:
                continue  # another publisher's malformed result is not the probe's concern
            if result.job_id == job_id:
                return result
    return None
