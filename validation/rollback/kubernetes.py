"""``rollout undo`` of the gpu-scheduler Deployment, as kubectl does it, through the Kubernetes API.

The Deployment's pod template is replaced by the template of the ReplicaSet of the previous revision
(without its ``pod-template-hash`` label), which starts a new rollout; then the rollout is awaited.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from runtime.protocol import contract

REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
POD_TEMPLATE_HASH = "pod-template-hash"
# Between two looks at a rollout in progress (seconds).
ROLLOUT_POLL_S = 2.0


class RolloutError(RuntimeError):
    """The rollback cannot be done or did not complete; the message says why."""


class DeploymentApi(Protocol):
    """Deployments and ReplicaSets as API JSON (dicts), the way kubectl sees them."""

    def read_deployment(self, namespace: str, name: str) -> dict[str, Any]:
        """The Deployment object."""
        ...

    def list_replica_sets(self, namespace: str, labels: dict[str, str]) -> list[dict[str, Any]]:
        """ReplicaSets matching ``labels``."""
        ...

    def patch_deployment(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> dict[str, Any]:
        """Apply a JSON patch to the Deployment; returns the result."""
        ...


class KubernetesDeploymentApi:
    """``DeploymentApi`` over ``kubernetes.client.AppsV1Api``."""

    def __init__(self, api: Any) -> None:
        from kubernetes import client

        self._api_client = api
        self._apps = client.AppsV1Api(api)

    def _json(self, obj: Any) -> dict[str, Any]:
        return self._api_client.sanitize_for_serialization(obj)

    def read_deployment(self, namespace: str, name: str) -> dict[str, Any]:
        """The Deployment object."""
        return self._json(self._apps.read_namespaced_deployment(name, namespace))

    def list_replica_sets(self, namespace: str, labels: dict[str, str]) -> list[dict[str, Any]]:
        """ReplicaSets matching ``labels``."""
        from validation.adapters.kube import selector

        return [self._json(rs) for rs in
                self._apps.list_namespaced_replica_set(namespace, label_selector=selector(labels)).items]

    def patch_deployment(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> dict[str, Any]:
        """Apply a JSON patch to the Deployment."""
        return self._json(self._apps.patch_namespaced_deployment(name, namespace, patch))


@dataclass(frozen=True)
class UndoPlan:
    """Which revision runs now, which one comes back, and the patch that brings it back."""

    current_revision: int
    target_revision: int
    target_images: tuple[str, ...]
    patch: list[dict[str, Any]]


def _revision(obj: dict[str, Any]) -> int:
    return int(obj.get("metadata", {}).get("annotations", {}).get(REVISION_ANNOTATION, "0"))


def plan_undo(deployment: dict[str, Any], replica_sets: list[dict[str, Any]],
              to_revision: int | None = None) -> UndoPlan:
    """The previous revision (or ``to_revision``) of ``deployment`` among its own ReplicaSets."""
    uid = deployment["metadata"]["uid"]
    owned = [rs for rs in replica_sets
             if any(ref.get("uid") == uid for ref in rs["metadata"].get("ownerReferences", []))]
    current = _revision(deployment)
    candidates = {_revision(rs): rs for rs in owned if _revision(rs) != current}
    if to_revision is not None:
        target = candidates.get(to_revision)
        if target is None:
            raise RolloutError(f"revision {to_revision} not found; known: {sorted(candidates) or 'none'}")
    else:
        older = [rev for rev in candidates if rev < current]
        if not older:
            raise RolloutError(f"deployment {deployment['metadata']['name']} has no revision before {current}")
        target = candidates[max(older)]
    template = dict(target["spec"]["template"])
    metadata = dict(template.get("metadata", {}))
    metadata["labels"] = {k: v for k, v in metadata.get("labels", {}).items() if k != POD_TEMPLATE_HASH}
    template["metadata"] = metadata
    images = tuple(c.get("image", "") for c in template.get("spec", {}).get("containers", []))
    return UndoPlan(current_revision=current, target_revision=_revision(target), target_images=images,
                    patch=[{"op": "replace", "path": "/spec/template", "value": template}])


def rollout_complete(deployment: dict[str, Any]) -> bool:
    """kubectl's ``rollout status`` test: the new generation observed, every replica updated and available."""
    spec, status = deployment.get("spec", {}), deployment.get("status", {})
    replicas = spec.get("replicas", 1)
    return (status.get("observedGeneration", 0) >= deployment["metadata"].get("generation", 0)
            and status.get("updatedReplicas", 0) == replicas
            and status.get("replicas", 0) == replicas
            and status.get("availableReplicas", 0) == replicas)


def undo(api: DeploymentApi, to_revision: int | None = None, dry_run: bool = False,
         timeout_s: float = contract.POD_READY_TIMEOUT_S, sleep: Callable[[float], None] = time.sleep,
         namespace: str = contract.RUNTIME_NAMESPACE, name: str = contract.SCHEDULER_DEPLOYMENT) -> UndoPlan:
    """Roll the Deployment back and wait (up to ``timeout_s``) for the rollout to finish."""
    deployment = api.read_deployment(namespace, name)
    selector_labels = deployment["spec"]["selector"].get("matchLabels", {})
    plan = plan_undo(deployment, api.list_replica_sets(namespace, selector_labels), to_revision)
    if dry_run:
        return plan
    api.patch_deployment(namespace, name, plan.patch)
    deadline = time.monotonic() + timeout_s
    while not rollout_complete(current := api.read_deployment(namespace, name)):
        if time.monotonic() >= deadline:
            status = current.get("status", {})
            raise RolloutError(f"rollout to revision {plan.target_revision} not complete after {timeout_s:.0f}s: "
                               f"{status.get('updatedReplicas', 0)} updated, {status.get('availableReplicas', 0)} "
                               "available; inspect the pods of gpu-scheduler")
        sleep(ROLLOUT_POLL_S)
    return plan
