"""What the pull-request preview identity may do inside the cluster: exactly what ``pulumi preview`` does there.

The Kubernetes provider previews by server-side apply with ``dryRun=All``. The API server authorizes a dry-run
request as the real one, so the preview needs ``get`` (the live object), ``patch`` (apply to an existing object)
and ``create`` (apply that creates one) on every kind the stack declares, and, for the stack's Roles and
ClusterRoles, ``escalate`` and ``bind`` (RBAC refuses to write a role granting more than the writer holds,
dry run or not). Helm keeps each release's state in Secrets of the release's namespace, which a preview of the
release reads (``get``, ``list``). The stack's own Secret (the control token) is reachable by its name only.

Kubernetes has no dry-run-only verb, so this identity could apply for real what it may dry-run: the
``preview`` GitHub environment's reviewers approve each run (docs/infrastructure.md, "CI and deploys"). Its IAM
roles (``components.bootstrap.PREVIEW_PROJECT_ROLES``) reach no Kubernetes object; this RBAC is all it has.
``components.ci_proof`` proves the rules below cover every object of the rendered stack and hold nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import pulumi

from components.k8s_objects import apply_manifest
from runtime.manifests.common import Manifest
from runtime.protocol import contract

PREVIEW_ROLE: Final = "gpu-runtime-preview"
RBAC_GROUP: Final = "rbac.authorization.k8s.io"
# What a server-side-apply dry run of an object needs; RBAC objects need escalate/bind on the roles besides.
APPLY_VERBS: Final = ("get", "patch", "create")
# The plural resource of every kind the stack declares, per API group (the RBAC rules' vocabulary).
DECLARED: Final[dict[str, tuple[str, ...]]] = {
    "": ("namespaces", "serviceaccounts", "configmaps", "services"),
    "apps": ("deployments", "daemonsets"),
    "policy": ("poddisruptionbudgets",),
    "networking.k8s.io": ("networkpolicies",),
    RBAC_GROUP: ("roles", "rolebindings", "clusterroles", "clusterrolebindings"),
    "apiextensions.k8s.io": ("customresourcedefinitions",),
    "kubernetes.dask.org": ("daskclusters", "daskworkergroups", "daskautoscalers"),
    "monitoring.googleapis.com": ("clusterpodmonitorings", "clusterrules"),
}
HELM_RELEASE_NAMESPACES: Final = (contract.DASK_OPERATOR_NAMESPACE,)


def preview_rules() -> list[dict[str, object]]:
    """The preview's cluster-wide rules: apply-dry-run every declared kind, write the stack's roles."""
    rules: list[dict[str, object]] = [
        {"apiGroups": [group], "resources": list(resources), "verbs": list(APPLY_VERBS)}
        for group, resources in DECLARED.items()
    ]
    rules.append({"apiGroups": [RBAC_GROUP], "resources": ["roles", "clusterroles"], "verbs": ["escalate", "bind"]})
    return rules


def preview_manifests(preview_account: str) -> list[Manifest]:
    """ClusterRole and binding for the preview account (a Google account: RBAC's ``User`` is its e-mail), and
    the namespaced Roles for Secrets: Helm's release state, and the stack's control-token Secret by name."""
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
    secret_roles = [
        (
            f"{PREVIEW_ROLE}-helm-releases",
            namespace,
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]},
        )
        for namespace in HELM_RELEASE_NAMESPACES
    ]
    secret_roles.append(
        (
            f"{PREVIEW_ROLE}-control-token",
            contract.RUNTIME_NAMESPACE,
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "resourceNames": [contract.CONTROL_TOKEN_SECRET],
                "verbs": ["get", "patch"],
            },
        )
    )
    for role, namespace, rule in secret_roles:
        metadata = {"name": role, "namespace": namespace}
        manifests += [
            {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "Role", "metadata": metadata, "rules": [rule]},
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
