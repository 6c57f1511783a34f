"""Vertex AI answers, and the region has GPU quota left for the accelerators the stack uses."""

from __future__ import annotations

from collections.abc import Sequence

from validation.adapters.vertex import Quota, VertexQuota
from validation.runner import Check, CheckFailed


def vertex_and_quota(vertex: VertexQuota, region: str, required_metrics: Sequence[str],
                     training_metrics: Sequence[str] = ()) -> Check:
    """Vertex AI lists custom jobs; each of ``required_metrics`` (Compute Engine, the pools' GPUs; if empty, some
    GPU quota) has room, and each of ``training_metrics`` (Vertex AI custom training, the overflow machine's GPU)
    has a limit above 0."""

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
        training = _training_limits(vertex, region, training_metrics)
        return f"Vertex AI reachable ({len(jobs)} recent gpu-runtime job(s)); {room}{training}"

    return Check("vertex.reachable-and-quota", run)


def _describe(quota: Quota | None) -> str:
    return "absent" if quota is None else f"{quota.usage:g}/{quota.limit:g} used"


def _training_limits(vertex: VertexQuota, region: str, metrics: Sequence[str]) -> str:
    """``; <metric> limit N`` for each Vertex AI training quota; fails naming each one whose limit is 0."""
    if not metrics:
        return ""
    try:
        limits = vertex.training_quota_limits()
    except Exception as exc:
        raise CheckFailed(f"cannot read Vertex AI quotas in {region}: {type(exc).__name__}: {exc}",
                          "enable cloudquotas.googleapis.com and grant roles/cloudquotas.viewer") from None
    empty = [m for m in metrics if limits.get(m, 0) <= 0]
    if empty:
        raise CheckFailed(f"no Vertex AI custom-job GPU quota in {region}: {', '.join(empty)} is 0",
                          f"request that quota for {region} (IAM & Admin > Quotas, service aiplatform.googleapis.com)"
                          ", or set vertex.overflow: off")
    return "".join(f"; {m} limit {limits[m]:g}" for m in metrics)
