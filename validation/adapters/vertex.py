"""Vertex AI and Compute Engine quota seam, with its adapter over Vertex AI's REST API and google-cloud-compute."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from runtime.protocol import contract

# A handful of recent jobs proves the API answers; listing all of them could page for a long time.
CUSTOM_JOB_PAGE_SIZE = 5
_AIPLATFORM = "aiplatform.googleapis.com"
# The Cloud Quotas API: a service's quotas with their limit per dimension (region), one page of QuotaInfo.
_QUOTA_INFOS = "https://cloudquotas.googleapis.com/v1/projects/{project}/locations/global/services/{service}/quotaInfos"
QUOTA_PAGE_SIZE = 1000
REQUEST_TIMEOUT_S = 30.0


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
    """Vertex AI reachability, and the quotas the stack counts against: Compute Engine's (regional and global)
    and Vertex AI's custom training."""

    def custom_job_names(self) -> list[str]:
        """Display names of recent ``gpu-runtime-*`` custom jobs (raises when Vertex AI is unreachable)."""
        ...

    def region_quotas(self) -> list[Quota]:
        """The region's Compute Engine quotas."""
        ...

    def project_quotas(self) -> list[Quota]:
        """The project's global Compute Engine quotas (``GPUS_ALL_REGIONS``, ``CPUS_ALL_REGIONS``, ...)."""
        ...

    def training_quota_limits(self) -> dict[str, float]:
        """The region's Vertex AI custom-training quota limits, by metric
        (``aiplatform.googleapis.com/custom_model_training_nvidia_t4_gpus``)."""
        ...


class GoogleVertexQuota:
    """``VertexQuota`` over the Vertex AI custom-jobs REST client, ``compute_v1.RegionsClient`` and
    ``compute_v1.ProjectsClient`` (Compute's ``regions.get`` and ``projects.get``, each with its ``quotas[]``)."""

    def __init__(self, project: str, region: str, jobs: Any = None, regions: Any = None, session: Any = None,
                 projects: Any = None) -> None:
        self._project, self._region = project, region
        self._session = session  # an authorized HTTP session for the Cloud Quotas API, made on first use
        if jobs is None:
            from runtime.vertex.rest import RestCustomJobs

            jobs = RestCustomJobs(region)
        if regions is None:
            from google.cloud import compute_v1

            regions = compute_v1.RegionsClient()
        if projects is None:
            from google.cloud import compute_v1

            projects = compute_v1.ProjectsClient()
        self._jobs, self._regions, self._projects = jobs, regions, projects

    def custom_job_names(self) -> list[str]:
        """Display names of recent ``gpu-runtime-*`` custom jobs."""
        jobs = self._jobs.list(f"projects/{self._project}/locations/{self._region}",
                               filter=f'display_name:"{contract.VERTEX_JOB_PREFIX}*"', page_size=CUSTOM_JOB_PAGE_SIZE)
        return [job["displayName"] for job in jobs[:CUSTOM_JOB_PAGE_SIZE]]

    def region_quotas(self) -> list[Quota]:
        """The region's Compute Engine quotas."""
        region = self._regions.get(project=self._project, region=self._region)
        return [Quota(metric=q.metric, limit=q.limit, usage=q.usage) for q in region.quotas]

    def project_quotas(self) -> list[Quota]:
        """The project's global Compute Engine quotas."""
        project = self._projects.get(project=self._project)
        return [Quota(metric=q.metric, limit=q.limit, usage=q.usage) for q in project.quotas]

    def training_quota_limits(self) -> dict[str, float]:
        """The region's Vertex AI quota limits by metric, from the Cloud Quotas API's QuotaInfo (a limit that
        varies by region is read for this one; one without a region dimension applies everywhere)."""
        if self._session is None:
            import google.auth
            from google.auth.transport.requests import AuthorizedSession

            credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
            self._session = AuthorizedSession(credentials)
        url = _QUOTA_INFOS.format(project=self._project, service=_AIPLATFORM)
        response = self._session.get(url, params={"pageSize": QUOTA_PAGE_SIZE}, timeout=REQUEST_TIMEOUT_S)
        response.raise_for_status()
        limits: dict[str, float] = {}
        for info in response.json().get("quotaInfos", []):
            for dimensions in info.get("dimensionsInfos", []):
                region = dimensions.get("dimensions", {}).get("region")
                if region in (None, self._region) and "value" in dimensions.get("details", {}):
                    limits[info["metric"]] = float(dimensions["details"]["value"])
                    if region == self._region:
                        break  # the region's own limit wins over the default
        return limits
