"""Turn a manifest from ``manifests`` into the matching typed ``pulumi_kubernetes`` resource.

Builders return Kubernetes-shaped dicts (camelCase, as the API and the schemas want them); the
Kubernetes provider accepts those keys as they are, so only the top-level fields need mapping to the
resource classes' arguments. A kind without a typed class here is a custom resource.
"""

from __future__ import annotations

from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s

from runtime.manifests.common import Manifest

_CLASSES: Final[dict[tuple[str, str], Any]] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "Secret"): k8s.core.v1.Secret,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "Service"): k8s.core.v1.Service,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("apps/v1", "DaemonSet"): k8s.apps.v1.DaemonSet,
    ("policy/v1", "PodDisruptionBudget"): k8s.policy.v1.PodDisruptionBudget,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): k8s.apiextensions.v1.CustomResourceDefinition,
}
# Top-level manifest fields and the resource arguments that carry them.
_ARGUMENTS: Final = {
    "metadata": "metadata",
    "spec": "spec",
    "data": "data",
    "stringData": "string_data",
    "type": "type",
    "rules": "rules",
    "roleRef": "role_ref",
    "subjects": "subjects",
}


def resource_name(prefix: str, manifest: Manifest) -> str:
    """A Pulumi resource name unique within a component: ``<prefix>-<kind>-<object name>``, lowercased."""
    return f"{prefix}-{manifest['kind'].lower()}-{manifest['metadata']['name']}"


def apply_manifest(prefix: str, manifest: Manifest, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """Declare ``manifest`` as a Pulumi resource named by ``resource_name(prefix, manifest)``."""
    name = resource_name(prefix, manifest)
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    fields = {key: value for key, value in manifest.items() if key not in ("apiVersion", "kind")}
    cls = _CLASSES.get((api_version, kind))
    if cls is None:
        return k8s.apiextensions.CustomResource(
            name, api_version=api_version, kind=kind, metadata=fields.pop("metadata"), opts=opts, **fields
        )
    unknown = set(fields) - set(_ARGUMENTS)
    if unknown:
        raise ValueError(f"{kind} {name}: fields {sorted(unknown)} have no resource argument mapping")
    return cls(name, opts=opts, **{_ARGUMENTS[key]: value for key, value in fields.items()})
