"""Kubernetes seam for validation (pods, HTTP through a port-forward, custom objects) and its adapter over
``kubernetes``."""

from __future__ import annotations

import http.client
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

# Bounds one proxied or forwarded HTTP call through the API server (seconds); /healthz answers in milliseconds.
PROXY_TIMEOUT_S = 10.0
# Largest response body read through a port-forward (a health answer is a few bytes).
MAX_FORWARDED_BODY = 1 << 20


class ForwardError(RuntimeError):
    """An HTTP call through a port-forward failed; the message names the pod, port and path."""


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
        """GET ``path`` on a pod's port through a port-forward (as ``kubectl port-forward`` + curl would)."""
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


def http_get(sock: socket.socket, path: str, where: str, timeout_s: float = PROXY_TIMEOUT_S) -> str:
    """One ``GET path`` over a connected stream socket; the body of a 200 answer, else ``ForwardError``."""
    sock.settimeout(timeout_s)
    # HTTP/1.0 with Connection: close: the server answers with a plain body and closes, no chunking to undo.
    sock.sendall(f"GET {path} HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
    response = http.client.HTTPResponse(sock)
    try:
        response.begin()
        body = response.read(MAX_FORWARDED_BODY).decode(errors="replace")
    except (OSError, http.client.HTTPException) as exc:
        raise ForwardError(f"GET {path} on {where} failed: {exc!r}") from None
    finally:
        response.close()
    if response.status != 200:
        raise ForwardError(f"GET {path} on {where} answered HTTP {response.status}: {body[:200]!r}")
    return body


class KubernetesApi:
    """``KubeApi`` over the official ``kubernetes`` client."""

    def __init__(self, api: Any, portforward: Callable[..., Any] | None = None) -> None:
        from kubernetes import client

        self._core = client.CoreV1Api(api)
        self._custom = client.CustomObjectsApi(api)
        if portforward is None:
            from kubernetes.stream import portforward
        self._portforward = portforward

    def list_pods(self, namespace: str, labels: dict[str, str]) -> list[PodInfo]:
        """Pods in ``namespace`` matching every label."""
        pods = self._core.list_namespaced_pod(namespace, label_selector=selector(labels)).items
        return [PodInfo(name=pod.metadata.name, phase=pod.status.phase or "Unknown",
                        ready=bool(pod.status.container_statuses)
                        and all(c.ready for c in pod.status.container_statuses))
                for pod in pods]

    def pod_get(self, namespace: str, pod: str, port: int, path: str) -> str:
        """GET ``path`` on a pod's port through a port-forward.

        A private GKE cluster's control plane reaches nodes only on 443 and 10250 (the kubelet), so the API
        server's pod proxy to any other port times out. A port-forward travels API server -> kubelet (10250)
        -> the pod's own network namespace, so it needs no extra firewall rule, and NetworkPolicies (which
        filter traffic between pods) do not apply to it. The caller needs ``create`` on ``pods/portforward``.
        """
        forward = self._portforward(self._core.connect_get_namespaced_pod_portforward, pod, namespace,
                                    ports=str(port))
        try:
            return http_get(forward.socket(port), path, f"pod {namespace}/{pod} port {port}")
        finally:
            forward.close()

    def list_custom_objects(self, group: str, version: str, namespace: str | None, plural: str) -> list[dict[str, Any]]:
        """Custom objects in ``namespace``, or of a cluster-scoped kind with ``None``."""
        if namespace is None:
            return self._custom.list_cluster_custom_object(group, version, plural)["items"]
        return self._custom.list_namespaced_custom_object(group, version, namespace, plural)["items"]
