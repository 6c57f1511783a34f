"""``ClusterOperations`` over the gcloud CLI: ``gcloud container operations list`` in the cluster's region.

https://cloud.google.com/sdk/gcloud/reference/container/operations/list: at most one of ``--location``,
``--region`` and ``--zone``; the list flags (``--filter``, ``--limit``, ``--page-size``, ``--sort-by``) and the
gcloud-wide ones (``--project``, ``--format``). Every operation of the location is listed (as JSON, the API's
``Operation`` fields) and ``validation.deploy_window`` picks the cluster's active ones, so no filter expression of
gcloud's is relied on.
"""

from __future__ import annotations

import json

from validation.adapters.bootstrap import Runner, run_command
from validation.deploy_window import ClusterOperation


class GcloudClusterOperations:
    """GKE's operations through gcloud, on the caller's credentials."""

    def __init__(self, run: Runner = run_command) -> None:
        self._run = run

    def listed(self, project: str, location: str) -> list[ClusterOperation]:
        """Every operation of ``location``; RuntimeError (gcloud's own message) when gcloud fails."""
        out = self._run(["gcloud", "container", "operations", "list", "--project", project, "--location", location,
                         "--format=json"], None, None)
        try:
            rows = json.loads(out or "[]")
        except ValueError:
            raise RuntimeError(f"gcloud container operations list answered no JSON: {out[:200]!r}") from None
        return [ClusterOperation(name=str(row.get("name", "")), operation_type=str(row.get("operationType", "")),
                                 status=str(row.get("status", "")), target=str(row.get("targetLink", "")),
                                 started=str(row.get("startTime", "")))
                for row in rows]
