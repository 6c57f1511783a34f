"""What the pull-request preview identity may do inside the cluster: read, and nothing it could abuse.

The Kubernetes provider previews by a server-side dry run, and the API server authorizes a dry run exactly as the
real request (https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run-authorization), so any write verb
given for the preview lets the pull request's code write for real: ``patch`` on Deployments runs its own image as
the scheduler, ``bind``/``escalate`` on roles makes it cluster-admin. Write verbs are not needed for a preview to
complete: where the dry run is Forbidden, pulumi-kubernetes previews the object from its inputs (client-side) and
carries on (``provider/pkg/provider/provider.go``: ``Create`` "defaulting to client-side" and ``Update`` "could not
preview Update" on ``IsForbidden`` in preview). So the preview may:

- ``get`` every kind the stack declares (the live object an update's dry run starts from, ``await.go`` ``Update``),
  cluster-wide: reads only, never Secrets;
- ``update`` the CRDs the stack applies, by name: the provider changes a CRD with a PUT, dry run in a preview
  (``await.go`` ``updateResource``), so the operator-upgrade pull request's new schemas are checked by the API
  server, not only rendered;
- ``get``/``list`` the Secrets of the Helm release's namespace (``dask-operator``), where Helm keeps the release's
  state, which a preview of the release reads.

Its IAM roles (``components.bootstrap.PREVIEW_PROJECT_ROLES``) reach no Kubernetes object; this RBAC is all it has.
``components.review.ci_proof`` proves the rules below cover every object of the rendered stack and hold nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import pulumi

from components.k8s_objects import apply_manifest
from runtime.manifests.common import Manifest
from runtime.manifests.helm_values import dask_operator_crds
from runtime.protocol import contract

PREVIEW_ROLE: Final = "gpu-runtime-preview"
RBAC_GROUP: Final = "rbac.authorization.k8s.io"
CRD_GROUP: Final = "apiextensions.k8s.io"
# The plural resource of every kind the stack declares, per API group (the RBAC rules' vocabulary).
DECLARED: Final[dict[str, tuple[str, ...]]] = {
    "": ("namespaces", "serviceaccounts", "configmaps", "services"),
    "apps": ("deployments", "daemonsets"),
    "policy": ("poddisruptionbudgets",),
    "networking.k8s.io": ("networkpolicies",),
    RBAC_GROUP: ("roles", "rolebindings", "clusterroles", "clusterrolebindings"),
    CRD_GROUP: ("customresourcedefinitions",),
    "kubernetes.dask.org": ("daskclusters", "daskworkergroups", "daskautoscalers"),
    "monitoring.googleapis.com": ("clusterpodmonitorings", "clusterrules"),
}
HELM_RELEASE_NAMESPACES: Final = (contract.DASK_OPERATOR_NAMESPACE,)


def preview_rules(crd_names: Sequence[str] | None = None) -> list[dict[str, object]]:
    """The preview's cluster-wide rules: read every declared kind, dry-run-update the stack's CRDs by name."""
    names = list(crd_names) if crd_names is not None else [crd["metadata"]["name"] for crd in dask_operator_crds()]
    rules: list[dict[str, object]] = [
        {"apiGroups": [group], "resources": list(resources), "verbs": ["get"]} for group, resources in DECLARED.items()
    ]
    rules.append({"apiGroups": [CRD_GROUP], "resources": ["customresourcedefinitions"], "resourceNames": names,
                  "verbs": ["update"]})
    return rules


def preview_manifests(preview_account: str) -> list[Manifest]:
    """ClusterRole and binding for the preview account (a Google account: RBAC's ``User`` is its e-mail), and
    the namespaced Roles for Helm's release Secrets."""
    subject = [{"kind": "User", "name": preview_account, "apiGroup": RBAC_GROUP}]
    manifests: list[Manifest] = [
        {
            "apiVersion": f"{RBAC_GROUP}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": PREVIEW_ROLE},
            "rules": preview_rules(),
        },
        {
            "apiVersion": f"{RBAC_GROUP}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": PREVIEW_ROLE},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": PREVIEW_ROLE},
            "subjects": subject,
        },
    ]
    for namespace in HELM_RELEASE_NAMESPACES:
        role = f"{PREVIEW_ROLE}-helm-releases"
        metadata = {"name": role, "namespace": namespace}
        manifests += [
            {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "Role", "metadata": metadata,
             "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]},
            {
                "apiVersion": f"{RBAC_GROUP}/v1",
                "kind": "RoleBinding",
                "metadata": metadata,
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": role},
                "subjects": subject,
            },
        ]
    return manifests


@dataclass
class PreviewAccessArgs:
    """Inputs of the preview-access component."""

    preview_account: str
    """E-mail of the preview service account (``components.bootstrap.PREVIEW_ACCOUNT_ID`` of the project)."""


class PreviewAccess(pulumi.ComponentResource):
    """RBAC of the pull-request preview identity (``preview_manifests``)."""

    def __init__(self, name: str, args: PreviewAccessArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-runtime:ci_access:PreviewAccess", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.objects = [apply_manifest(name, manifest, child) for manifest in preview_manifests(args.preview_account)]
        self.register_outputs({"preview_account": args.preview_account})
