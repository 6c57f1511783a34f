"""Drill jobs: ``noop`` requests (sleep, optional simulated failure) published straight to the request topic."""

from __future__ import annotations

from typing import Literal

from kernels.params import JobType, NoopParams
from runtime.protocol import contract
from runtime.protocol.messages import JobRequest
from validation.adapters.pubsub import PubSubAdmin


def publish_noop(pubsub: PubSubAdmin, job_id: str, sleep_s: float = 0.0,
                 fail: Literal["transient", "permanent"] | None = None) -> JobRequest:
    """Publish one drill job and return it."""
    request = JobRequest(job_id=job_id, type=JobType.NOOP, params=NoopParams(sleep_s=sleep_s, fail=fail),
                         session_id="gpurt-drill")
    pubsub.publish(contract.REQUEST_TOPIC, *request.to_message())
    return request
