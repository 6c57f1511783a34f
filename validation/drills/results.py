"""Every result a drill's jobs produce, counted per job: a second result for one job is a duplicate."""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Iterable

from pydantic import ValidationError

from runtime.protocol import contract
from runtime.protocol.messages import JobResult
from validation.adapters.pubsub import PubSubAdmin

TAP_PREFIX = "gpurt-drill-"
# One pull waits at most this long (seconds), so deadlines are checked often.
PULL_SLICE_S = 1.0


class ResultTap:
    """A temporary subscription on the result topic that keeps every result of the jobs it watches."""

    def __init__(self, pubsub: PubSubAdmin, job_ids: Iterable[str]) -> None:
        self._pubsub = pubsub
        self._name = f"{TAP_PREFIX}{uuid.uuid4().hex[:12]}"
        self.watched = set(job_ids)
        self.results: dict[str, list[JobResult]] = defaultdict(list)

    def __enter__(self) -> ResultTap:
        self._pubsub.create_subscription(self._name, contract.RESULT_TOPIC, ack_deadline_s=60)
        return self

    def __exit__(self, *exc: object) -> None:
        self._pubsub.delete_subscription(self._name)

    def drain(self, timeout_s: float) -> None:
        """Pull whatever arrives within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            self._pull_once(min(PULL_SLICE_S, left))

    def wait_all(self, timeout_s: float) -> bool:
        """Pull until every watched job has a result or ``timeout_s`` passes; True if all arrived."""
        deadline = time.monotonic() + timeout_s
        while not self.watched <= self.results.keys():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._pull_once(min(PULL_SLICE_S, left))
        return True

    def missing(self) -> set[str]:
        """Watched jobs without a result."""
        return self.watched - self.results.keys()

    def duplicates(self) -> dict[str, int]:
        """Watched jobs with more than one result, and how many."""
        return {job: len(found) for job, found in self.results.items() if len(found) > 1}

    def _pull_once(self, timeout_s: float) -> None:
        messages = self._pubsub.pull(self._name, 50, timeout_s=timeout_s)
        self._pubsub.acknowledge(self._name, [m.ack_id for m in messages])
        for message in messages:
            try:
                result = JobResult.model_validate_json(message.data)
            except ValidationError:
                continue
            if result.job_id in self.watched:
                self.results[result.job_id].append(result)
