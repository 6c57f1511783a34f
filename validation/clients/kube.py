"""Kubernetes seam for validation (pods, proxied HTTP, custom objects) and its adapter over ``kubernetes``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

# Bounds one proxied HTTP call through the API server (seconds); /healthz answers in milliseconds.
PROXY_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class PodInfo:
    """A pod's name, phase and whether all its containers are ready."""

    name: str
    phase: str
    ready: bool


class KubeApi(Protocol):
    """What validation reads from the cluster."""

    def list_pods(self, namespace: str, labels: dict[str, str]) -> list[PodInfo]:
        """Pods in ``namespace`` matching every label."""
        ...

    def pod_get(self, namespace: str, pod: str, port: int, path: str) -> str:
        """GET ``path`` on a pod's port through the API server proxy (as ``kubectl exec curl`` would)."""
        ...

    def service_get(self, namespace: str, service: str, port: int, path: str) -> str:
        """GET ``path`` on a service's port through the API server proxy."""
        ...

    def list_custom_objects(self, group: str, version: str, namespace: str | None, plural: str) -> list[dict[str, Any]]:
        """Custom objects in ``namespace``, or of a cluster-scoped kind (e.g. ClusterRules) with ``None``."""
        ...


def selector(labels: dict[str, str]) -> str:
    """A label selector string (``a=b,c=d``)."""
    return ",".join(f"{key}={value}" for key, value in labels.items())


def api_client(context: str | None = None, kubeconfig: str | None = None) -> Any:
    """A Kubernetes ``ApiClient``: in-cluster config when running in a pod; else the kubeconfig ``context``
    when named; else ``kubeconfig`` (the stack's own, pointing at the cluster's DNS endpoint) when given;
    else the current context of ``~/.kube/config``."""
    import yaml
    from kubernetes import client, config

    try:
        config.load_incluster_config()
        return client.ApiClient()
    except config.ConfigException:
        if context is None and kubeconfig:
            return config.new_client_from_config_dict(yaml.safe_load(kubeconfig))
        return config.new_client_from_config(context=context)


class KubernetesApi:
    """``KubeApi`` over the official ``kubernetes`` client."""

    def __init__(self, api: Any) -> None:
        from kubernetes import client

        self._core = client.CoreV1Api(api)
        self._custom = client.CustomObjectsApi(api)

    def list_pods(self, namespace: str, labels: dict[str, str]) -> list[PodInfo]:
        """Pods in ``namespace`` matching every label."""
        pods = self._core.list_namespaced_pod(namespace, label_selector=selector(labels)).items
        return [PodInfo(name=pod.metadata.name, phase=pod.status.phase or "Unknown",
                        ready=bool(pod.status.container_statuses)
                        and all(c.ready for c in pod.status.container_statuses))
                for pod in pods]

    def pod_get(self, namespace: str, pod: str, port: int, path: str) -> str:
        """GET ``path`` on a pod's port through the API server proxy."""
        response = self._core.connect_get_namespaced_pod_proxy_with_path(
            f"{pod}:{port}", namespace, path.lstrip("/"), _preload_content=False, _request_timeout=PROXY_TIMEOUT_S)
        return response.data.decode()

    def service_get(self, namespace: str, service: str, port: int, path: str) -> str:
        """GET ``path`` on a service's port through the API server proxy."""
        response = self._core.connect_get_namespaced_service_proxy_with_path(
            f"{service}:{port}", namespace, path.lstrip("/"), _preload_content=False,
            _request_timeout=PROXY_TIMEOUT_S)
        return response.data.decode()

    def list_custom_objects(self, group: str, version: str, namespace: str | None, plural: str) -> list[dict[str, Any]]:
        """Custom objects in ``namespace``, or of a cluster-scoped kind with ``None``."""
        if namespace is None:
            return self._custom.list_cluster_custom_object(group, version, plural)["items"]
        return self._custom.list_namespaced_custom_object(group, version, namespace, plural)["items"]
