"""Vertex AI answers, and the region has GPU quota left for the accelerators the stack uses."""

from __future__ import annotations

from collections.abc import Sequence

from validation.adapters.vertex import Quota, VertexQuota
from validation.runner import Check, CheckFailed


def vertex_and_quota(vertex: VertexQuota, region: str, required_metrics: Sequence[str]) -> Check:
    """Vertex AI lists custom jobs; each of ``required_metrics`` (or, if empty, some GPU quota) has room."""

    def run() -> str:
        try:
            jobs = vertex.custom_job_names()
        except Exception as exc:  # any API error means "not reachable", with its reason
            raise CheckFailed(f"Vertex AI in {region} unreachable: {type(exc).__name__}: {exc}",
                              "enable aiplatform.googleapis.com and grant roles/aiplatform.user") from None
        quotas = {q.metric: q for q in vertex.region_quotas()}
        wanted = list(required_metrics) or [m for m in quotas if "NVIDIA_" in m and quotas[m].limit > 0]
        short = [m for m in wanted if m not in quotas or quotas[m].available < 1]
        if not wanted or short:
            detail = ", ".join(f"{m} {_describe(quotas.get(m))}" for m in short) or "no NVIDIA GPU quota at all"
            raise CheckFailed(f"no GPU quota left in {region}: {detail}",
                              f"request GPU quota for {region} (IAM & Admin > Quotas) or use another region")
        room = ", ".join(f"{m} {quotas[m].available:g}/{quotas[m].limit:g} free" for m in wanted)
        return f"Vertex AI reachable ({len(jobs)} recent gpu-runtime job(s)); {room}"

    return Check("vertex.reachable-and-quota", run)


def _describe(quota: Quota | None) -> str:
    return "absent" if quota is None else f"{quota.usage:g}/{quota.limit:g} used"
