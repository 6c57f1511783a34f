"""Vertex AI and Compute Engine quota seam, with its adapter over Vertex AI's REST API and google-cloud-compute."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from runtime.protocol import contract

# A handful of recent jobs proves the API answers; listing all of them could page for a long time.
CUSTOM_JOB_PAGE_SIZE = 5


@dataclass(frozen=True)
class Quota:
    """A regional quota: its metric name (``NVIDIA_T4_GPUS``), limit and current usage."""

    metric: str
    limit: float
    usage: float

    @property
    def available(self) -> float:
        """What is left to use."""
        return self.limit - self.usage


class VertexQuota(Protocol):
    """Vertex AI reachability and the region's GPU quotas."""

    def custom_job_names(self) -> list[str]:
        """Display names of recent ``gpu-runtime-*`` custom jobs (raises when Vertex AI is unreachable)."""
        ...

    def region_quotas(self) -> list[Quota]:
        """The region's Compute Engine quotas."""
        ...


class GoogleVertexQuota:
    """``VertexQuota`` over the Vertex AI custom-jobs REST client and ``compute_v1.RegionsClient``."""

    def __init__(self, project: str, region: str, jobs: Any = None, regions: Any = None) -> None:
        self._project, self._region = project, region
        if jobs is None:
            from runtime.scheduler.backends.vertex_rest import RestCustomJobs

            jobs = RestCustomJobs(region)
        if regions is None:
            from google.cloud import compute_v1

            regions = compute_v1.RegionsClient()
        self._jobs, self._regions = jobs, regions

    def custom_job_names(self) -> list[str]:
        """Display names of recent ``gpu-runtime-*`` custom jobs."""
        jobs = self._jobs.list(f"projects/{self._project}/locations/{self._region}",
                               filter=f'display_name:"{contract.VERTEX_JOB_PREFIX}*"', page_size=CUSTOM_JOB_PAGE_SIZE)
        return [job["displayName"] for job in jobs[:CUSTOM_JOB_PAGE_SIZE]]

    def region_quotas(self) -> list[Quota]:
        """The region's Compute Engine quotas."""
        region = self._regions.get(project=self._project, region=self._region)
        return [Quota(metric=q.metric, limit=q.limit, usage=q.usage) for q in region.quotas]
