"""What a result cache hit costs: publish to result of repeated computations against their first runs.

On one running platform, each of ``jobs`` small european options with its own seed is published alone and
waited for (a miss: it runs on a Dask worker), then each is published again under a new job id (a hit:
answered from the result store at intake, docs/scheduler.md "Result cache"). One job runs first, apart, so that
no measured miss pays for the kernel's compilation. The figures say how long a client waits for each, whether
any Dask run happened during the hits (the scheduler's run-time histogram must not move), and whether every hit
carried its miss's result bit for bit.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from gpurt.bench.runtime.measure import percentile
from gpurt.client import Client, wait
from runtime.access.target import Target
from runtime.protocol.contract import METRICS
from runtime.protocol.messages import JobRequest, JobResult, JobStatus

# Small enough that a miss is mostly the platform's round trip, not the kernel; the same for every job but the seed.
JOB_PARAMS: Final = {"spot": 100.0, "strike": 100.0, "rate": 0.03, "volatility": 0.2, "maturity": 1.0,
                     "paths": 2_000}
JOB_TYPE: Final = "european_option"
# The goal (issue 45): a hit's publish-to-result p50 at most this, locally, with no Dask task started.
HIT_P50_GOAL_S: Final = 0.050

Progress = Callable[[str, int], None]


@dataclass(frozen=True)
class CacheFigures:
    """Publish-to-result seconds of each miss and each hit, and what the hits proved."""

    jobs: int
    miss_s: list[float]
    hit_s: list[float]
    runs_during_hits: float  # runs the scheduler timed while the hits were answered: 0 when none ran
    identical: bool  # every hit's result and artifacts are its miss's, bit for bit

    @property
    def miss_p50_s(self) -> float | None:
        """Median publish-to-result of a miss."""
        return percentile(self.miss_s, 50)

    @property
    def hit_p50_s(self) -> float | None:
        """Median publish-to-result of a hit."""
        return percentile(self.hit_s, 50)

    @property
    def hit_p95_s(self) -> float | None:
        """95th percentile publish-to-result of a hit."""
        return percentile(self.hit_s, 95)

    @property
    def met(self) -> bool:
        """Whether the hits met the goal: p50 within ``HIT_P50_GOAL_S``, nothing run, results identical."""
        return (self.hit_p50_s is not None and self.hit_p50_s <= HIT_P50_GOAL_S and self.runs_during_hits == 0
                and self.identical)


def measure(target: Target, jobs: int, timeout_s: float, progress: Progress | None = None) -> CacheFigures:
    """Run ``jobs`` misses, then the same ``jobs`` computations again as hits, one at a time, against ``target``.

    Each goes through the Python API's ``Client`` (as a user's submit does, with the user's broker token): its
    publish is the one the raw path would make, and its future takes the result answering the very body sent.
    """
    report = progress or (lambda phase, done: None)
    base = secrets.randbelow(2**40)  # seeds no earlier run on this platform used: the misses are misses
    with Client(target=target) as client:
        def timed(seed: int) -> tuple[float, JobResult]:
            request = JobRequest.model_validate({"job_id": f"bench-cache-{uuid.uuid4().hex[:12]}",
                                                 "type": JOB_TYPE, "params": {**JOB_PARAMS, "seed": seed}})
            began = time.perf_counter()
            future = client.submit(request)
            done, _ = wait([future], timeout_s)
            elapsed = time.perf_counter() - began
            result = future.outcome().raw if done else None
            if result is None or result.status is not JobStatus.SUCCEEDED:
                raise RuntimeError(f"the benchmark's job {request.job_id} did not succeed: {result}")
            return elapsed, result

        timed(base - 1 if base else 2**40)  # compiles the kernel; not measured
        misses = []
        for index in range(jobs):
            misses.append(timed(base + index))
            report("miss", index + 1)
        runs_before = timed_runs(target.api_url, JOB_TYPE)
        hits = []
        for index in range(jobs):
            hits.append(timed(base + index))
            report("hit", index + 1)
        runs_after = timed_runs(target.api_url, JOB_TYPE)
    identical = all(
        hit.cached and not miss.cached and hit.cached_from == miss.job_id
        and json.dumps(hit.result) == json.dumps(miss.result) and hit.artifacts == miss.artifacts
        for (_, miss), (_, hit) in zip(misses, hits, strict=True))
    return CacheFigures(jobs, [s for s, _ in misses], [s for s, _ in hits], runs_after - runs_before, identical)


def timed_runs(api_url: str, job_type: str) -> float:
    """Runs of ``job_type`` the scheduler at ``api_url`` has timed (its run-time histogram's count, from
    ``GET /metrics``): a job answered from the store or the cache ran nothing and is not counted."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{api_url.rstrip('/')}/metrics", timeout=10.0).text
    name = f"{METRICS.job_duration_seconds}_count"
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == name and sample.labels.get("type") == job_type)
