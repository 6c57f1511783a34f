"""Vertex AI answers: the scheduler's overflow and pinned job types can submit custom jobs."""

from __future__ import annotations

from validation.adapters.vertex import VertexQuota
from validation.runner import Check, CheckFailed


def vertex_reachable(vertex: VertexQuota, region: str) -> Check:
    """Vertex AI lists the recent ``gpu-runtime-*`` custom jobs (connectivity and permission, not capacity)."""

    def run() -> str:
        try:
            jobs = vertex.custom_job_names()
        except Exception as exc:  # any API error means "not reachable", with its reason
            raise CheckFailed(f"Vertex AI in {region} unreachable: {type(exc).__name__}: {exc}",
                              "enable aiplatform.googleapis.com and grant roles/aiplatform.user") from None
        return f"Vertex AI reachable in {region} ({len(jobs)} recent gpu-runtime job(s))"

    return Check("vertex.reachable", run)
