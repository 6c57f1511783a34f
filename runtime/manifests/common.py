"""Pieces every manifest shares: metadata, resource blocks and the hardened security contexts.

One place decides what "non-root, least privilege" means for a container of this project, so the
scheduler, the Dask pods and anything added later cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from runtime.protocol import contract

# The images run as this unprivileged user (docker creates it); pods pin it so a base image that
# forgets USER still does not run as root.
RUN_AS_USER: Final = 10001
# Pod Security Admission level for namespaces whose pods all meet the hardened contexts below.
PSA_RESTRICTED: Final = "restricted"
# A namespace that must host privileged node agents (the DCGM exporter reads GPUs it does not claim).
PSA_PRIVILEGED: Final = "privileged"

Manifest = dict[str, Any]


def labels(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The project's common labels, plus ``extra`` (which wins on a clash)."""
    return {**contract.COMMON_LABELS, **(extra or {})}


def metadata(
    name: str,
    namespace: str | None = None,
    extra_labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> Manifest:
    """Object metadata with the common labels; ``namespace`` is omitted for cluster-scoped objects."""
    meta: Manifest = {"name": name, "labels": labels(extra_labels)}
    if namespace is not None:
        meta["namespace"] = namespace
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def namespace(name: str, pod_security: str = PSA_RESTRICTED) -> Manifest:
    """A Namespace whose Pod Security Admission level is enforced, so a weaker pod is refused at admission."""
    psa = {f"pod-security.kubernetes.io/{mode}": pod_security for mode in ("enforce", "warn", "audit")}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata(name, extra_labels=psa)}


@dataclass(frozen=True)
class Resources:
    """Requests and limits of one container, in Kubernetes quantity syntax.

    ``gpus`` becomes an ``nvidia.com/gpu`` limit (extended resources cannot be overcommitted, so the
    request equals it).
    """

    cpu_request: str
    memory_request: str
    cpu_limit: str
    memory_limit: str
    gpus: int = 0
    ephemeral_storage: str | None = None
    """Local disk (emptyDir volumes, logs) requested and allowed; None leaves it unaccounted."""

    def to_manifest(self) -> Manifest:
        """The container ``resources`` block."""
        requests = {"cpu": self.cpu_request, "memory": self.memory_request}
        limits = {"cpu": self.cpu_limit, "memory": self.memory_limit}
        if self.ephemeral_storage:
            # Requested, the scheduler places no more workers on a node than its disk holds; limited, a worker
            # that overfills its scratch is evicted alone instead of the kubelet evicting the node's pods.
            requests["ephemeral-storage"] = limits["ephemeral-storage"] = self.ephemeral_storage
        if self.gpus:
            # A quantity string: the Dask CRDs type resource values as strings and reject a bare integer.
            requests[contract.GPU_RESOURCE] = str(self.gpus)
            limits[contract.GPU_RESOURCE] = str(self.gpus)
        return {"requests": requests, "limits": limits}


def workload_identity_service_account(account: contract.ServiceAccountSpec, gcp_service_account_email: str) -> Manifest:
    """The Kubernetes account of ``account``, bound to its Google account through Workload Identity (no keys)."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(
            account.k8s_service_account,
            account.k8s_namespace,
            annotations={"iam.gke.io/gcp-service-account": gcp_service_account_email},
        ),
    }


def pod_security_context() -> Manifest:
    """Pod-level context: a fixed non-root user and group, and the runtime's default seccomp profile."""
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "fsGroup": RUN_AS_USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> Manifest:
    """Container-level context: no privilege escalation, no capabilities, a read-only root filesystem."""
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def scratch_volume(name: str, size_limit: str) -> Manifest:
    """A size-capped emptyDir: the only writable place when the root filesystem is read-only."""
    return {"name": name, "emptyDir": {"sizeLimit": size_limit}}


def gpu_toleration() -> Manifest:
    """Tolerates the taint GKE puts on GPU nodes, which keeps everything else off them."""
    return {
        "key": contract.GPU_TAINT_KEY,
        "operator": "Equal",
        "value": contract.GPU_TAINT_VALUE,
        "effect": contract.GPU_TAINT_EFFECT,
    }
