"""Drill jobs: ``noop`` requests (sleep, optional simulated failure) published straight to the request topic."""

from __future__ import annotations

from typing import Literal

from ops.adapters.pubsub import PubSubAdmin
from protocol import contract
from protocol.messages import JobRequest
from protocol.params import JobType, NoopParams


def publish_noop(pubsub: PubSubAdmin, job_id: str, sleep_s: float = 0.0,
                 fail: Literal["transient", "permanent"] | None = None) -> JobRequest:
    """Publish one drill job and return it."""
    request = JobRequest(job_id=job_id, type=JobType.NOOP, params=NoopParams(sleep_s=sleep_s, fail=fail),
                         session_id="gpurt-drill")
    pubsub.publish(contract.REQUEST_TOPIC, *request.to_message())
    return request
