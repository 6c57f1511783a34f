"""Every quota the stack reaches at its maxima exists in the project: capacity that exists, not capacity idle.

A quota's limit is compared with the stack's need (``components.review.quotas``), never with what is left of it: a
pool busy up to its quota is a healthy pool, and its own nodes are the usage. A limit below the need is "no
capacity" (``NoCapacity``): the platform works, nothing is rolled back, and the fix names the quota to request.
A quota that cannot be read (API off, permission missing) is a failure: validation cannot vouch for the stack.
"""

from __future__ import annotations

from collections.abc import Sequence

from components.review.quotas import GLOBAL, VERTEX_AI, QuotaNeed
from validation.adapters.vertex import Quota, VertexQuota
from validation.runner import Check, CheckFailed, NoCapacity

QUOTAS_CONSOLE = "https://console.cloud.google.com/iam-admin/quotas?project={project}"


def quota_capacity(quotas: VertexQuota, project: str, region: str, needs: Sequence[QuotaNeed]) -> Check:
    """Each quota of ``needs`` (Compute Engine's regional and global, Vertex AI's custom training) has a limit of
    at least the stack's need."""

    def run() -> str:
        if not needs:
            return "the stack's state holds no node pool, so no quota to check"
        limits = _limits(quotas, region, needs)
        short = [n for n in needs if limits.get((n.service, n.scope, n.metric), 0.0) < n.amount]
        if short:
            raise NoCapacity(
                "below the stack's need: " + "; ".join(_shown(n, limits) for n in short),
                f"request each ({QUOTAS_CONSOLE.format(project=project)}, or "
                + "; ".join(f"`{n.request_command(project)}`" for n in short)
                + "); the pools work up to the quota meanwhile")
        return ", ".join(_shown(n, limits) for n in needs)

    return Check("quota.capacity", run)


def _shown(need: QuotaNeed, limits: dict[tuple[str, str, str], float]) -> str:
    limit = limits.get((need.service, need.scope, need.metric))
    where = "" if need.scope != GLOBAL else " (global)"
    return f"{need.metric}{where} need {need.amount} {need.unit}, limit {'absent' if limit is None else f'{limit:g}'}"


def _limits(quotas: VertexQuota, region: str, needs: Sequence[QuotaNeed]) -> dict[tuple[str, str, str], float]:
    """The limits of the quotas ``needs`` name, keyed like them: (service, scope, metric)."""
    try:
        compute: list[tuple[str, Quota]] = [(region, q) for q in quotas.region_quotas()]
        compute += [(GLOBAL, q) for q in quotas.project_quotas()]
    except Exception as exc:
        raise CheckFailed(f"cannot read Compute Engine quotas of {region}: {type(exc).__name__}: {exc}",
                          "grant the validating identity compute.regions.get and compute.projects.get "
                          "(roles/compute.networkViewer)") from None
    limits = {("compute.googleapis.com", scope, q.metric): q.limit for scope, q in compute}
    if any(n.service == VERTEX_AI for n in needs):
        try:
            training = quotas.training_quota_limits()
        except Exception as exc:
            raise CheckFailed(f"cannot read Vertex AI quotas in {region}: {type(exc).__name__}: {exc}",
                              "enable cloudquotas.googleapis.com and grant roles/cloudquotas.viewer") from None
        limits |= {(VERTEX_AI, region, metric): limit for metric, limit in training.items()}
    return limits
