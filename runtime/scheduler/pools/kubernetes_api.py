"""The Kubernetes API as the cloud pools use it: one Protocol, and its adapter over the official client.

``KubernetesPools`` and its ``QueuedProvisioner`` call only the methods of ``KubernetesApi`` (each declared,
with its RBAC verb, in ``components.review.cloud_calls``); tests hand them an in-memory stand-in.
``KubernetesClients`` implements it with the client's ``CustomObjectsApi``, ``CoreV1Api`` and ``AppsV1Api``,
turning their typed answers into the plain dicts (camelCase keys, as the API server sends them) that custom
objects already come back as, so the pools read every object one way. Errors are the client's ``ApiException``.
"""

from __future__ import annotations

from typing import Any, Protocol


class KubernetesApi(Protocol):
    """Custom objects (Dask worker groups and autoscaler, ProvisioningRequests), PodTemplates, Deployments."""

    def list_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                      label_selector: str = "") -> dict[str, Any]:
        """``{"items": [...]}`` of the kind ``plural`` in ``namespace`` matching ``label_selector``."""
        ...

    def patch_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str,
                                       body: dict[str, Any]) -> dict[str, Any]:
        """Merge-patch one custom object; returns it as patched."""
        ...

    def create_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                        body: dict[str, Any]) -> dict[str, Any]:
        """Create a custom object; returns it as stored."""
        ...

    def delete_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                        name: str) -> object:
        """Delete one custom object."""
        ...

    def create_namespaced_pod_template(self, namespace: str, body: dict[str, Any]) -> object:
        """Create a PodTemplate."""
        ...

    def list_namespaced_pod_template(self, namespace: str, label_selector: str = "") -> dict[str, Any]:
        """``{"items": [...]}`` of the PodTemplates matching ``label_selector``."""
        ...

    def delete_namespaced_pod_template(self, name: str, namespace: str) -> object:
        """Delete a PodTemplate."""
        ...

    def list_namespaced_deployment(self, namespace: str, label_selector: str = "") -> dict[str, Any]:
        """``{"items": [...]}`` of the Deployments matching ``label_selector``."""
        ...

    def delete_namespaced_deployment(self, name: str, namespace: str) -> object:
        """Delete a Deployment (its pods go with it)."""
        ...


class KubernetesClients:
    """``KubernetesApi`` over the official client's API groups."""

    def __init__(self, custom: Any, core: Any, apps: Any) -> None:
        self._custom = custom
        self._core = core
        self._apps = apps

    @classmethod
    def in_cluster(cls) -> KubernetesClients:
        """Clients with the pod's own service account (in-cluster config)."""
        from kubernetes import client, config

        config.load_incluster_config()
        return cls(client.CustomObjectsApi(), client.CoreV1Api(), client.AppsV1Api())

    def list_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                      label_selector: str = "") -> dict[str, Any]:
        """See ``KubernetesApi``."""
        return self._custom.list_namespaced_custom_object(group, version, namespace, plural,
                                                          label_selector=label_selector)

    def patch_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str,
                                       body: dict[str, Any]) -> dict[str, Any]:
        """See ``KubernetesApi``."""
        return self._custom.patch_namespaced_custom_object(group, version, namespace, plural, name, body)

    def create_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                        body: dict[str, Any]) -> dict[str, Any]:
        """See ``KubernetesApi``."""
        return self._custom.create_namespaced_custom_object(group, version, namespace, plural, body)

    def delete_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                        name: str) -> object:
        """See ``KubernetesApi``."""
        return self._custom.delete_namespaced_custom_object(group, version, namespace, plural, name)

    def create_namespaced_pod_template(self, namespace: str, body: dict[str, Any]) -> object:
        """See ``KubernetesApi``."""
        return self._core.create_namespaced_pod_template(namespace, body)

    def list_namespaced_pod_template(self, namespace: str, label_selector: str = "") -> dict[str, Any]:
        """See ``KubernetesApi``."""
        return self._plain(self._core.list_namespaced_pod_template(namespace, label_selector=label_selector))

    def delete_namespaced_pod_template(self, name: str, namespace: str) -> object:
        """See ``KubernetesApi``."""
        return self._core.delete_namespaced_pod_template(name, namespace)

    def list_namespaced_deployment(self, namespace: str, label_selector: str = "") -> dict[str, Any]:
        """See ``KubernetesApi``."""
        return self._plain(self._apps.list_namespaced_deployment(namespace, label_selector=label_selector))

    def delete_namespaced_deployment(self, name: str, namespace: str) -> object:
        """See ``KubernetesApi``; the ReplicaSet and pod go in the background."""
        return self._apps.delete_namespaced_deployment(name, namespace, propagation_policy="Background")

    def _plain(self, typed: object) -> dict[str, Any]:
        # The client's own serializer: the API's field names, dates as strings, unset fields left out.
        return self._core.api_client.sanitize_for_serialization(typed)
