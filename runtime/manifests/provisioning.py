"""Capacity for a queued GPU pool: the PodTemplate and ProvisioningRequest GKE's Dynamic Workload Scheduler answers.

A node pool with queued provisioning gets nodes only for a ``ProvisioningRequest`` (API group
``autoscaling.x-k8s.io``, version ``v1``, class ``queued-provisioning.gke.io``) that references a
``PodTemplate`` describing the pods to place; GKE provisions the whole request at once, in one zone, and
only pods that carry the two consume annotations below may use that capacity. The gpu-scheduler creates
these objects at run time, when it scales a queued pool (``runtime.scheduler.pools.queued``); this
module only renders them, from the pool's DaskWorkerGroup, so the request asks for exactly what the
workers need (GPU and CPU resources, node selector, tolerations). See docs/scheduler.md.

Names and fields follow GKE's "Run a large-scale workload with flex-start with queued provisioning" guide
and the cluster autoscaler's ``autoscaling.x-k8s.io/v1`` types.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, Final

from runtime.manifests import gpu_options
from runtime.manifests.common import Manifest
from runtime.protocol import contract

GROUP: Final = "autoscaling.x-k8s.io"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
PLURAL: Final = "provisioningrequests"
KIND: Final = "ProvisioningRequest"
PROVISIONING_CLASS: Final = "queued-provisioning.gke.io"
# Both must be on a pod for it to consume a request: GKE then places it only on that request's nodes.
CONSUME_ANNOTATION: Final = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION: Final = "autoscaling.x-k8s.io/provisioning-class-name"
# GKE applies its pod admission (validations and mutations) to a PodTemplate carrying this label, which it
# needs to work out the nodes the request's pods require.
WARDEN_LABEL: Final = ("cloud.google.com/apply-warden-policies", "true")
MAX_RUN_DURATION_PARAMETER: Final = "maxRunDurationSeconds"

# Condition types the cluster autoscaler sets on a request (autoscaling.x-k8s.io/v1).
ACCEPTED: Final = "Accepted"
PROVISIONED: Final = "Provisioned"
FAILED: Final = "Failed"
CAPACITY_REVOKED: Final = "CapacityRevoked"
BOOKING_EXPIRED: Final = "BookingExpired"
CONDITIONS: Final = (ACCEPTED, PROVISIONED, FAILED, CAPACITY_REVOKED, BOOKING_EXPIRED)

# Ties the objects to the Dask cluster whose pool they serve (the pool itself is contract.DASK_POOL_LABEL).
CLUSTER_LABEL: Final = "gpu-runtime.dev/dask-cluster"
# The scheduler creates and deletes these objects, not Pulumi: the common labels say so.
MANAGED_BY: Final = {"managed-by": contract.SCHEDULER_DEPLOYMENT}
# Object names are DNS labels here (63 characters), though both kinds would take a longer subdomain: the name
# is also the pods' annotation value and shows in `kubectl get`, where a short, predictable one helps.
MAX_NAME_LENGTH: Final = 63
_DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def request_name(group: str, token: str) -> str:
    """The name of a request (and its PodTemplate) for worker group ``group``: ``<group>-<token>``.

    Raises ValueError unless it is a DNS label of at most 63 characters.
    """
    name = f"{group}-{token}"
    if len(name) > MAX_NAME_LENGTH or not _DNS_LABEL.fullmatch(name):
        raise ValueError(f"{name!r} is not a DNS label of at most {MAX_NAME_LENGTH} characters")
    return name


def object_labels(pool: str, cluster: str) -> dict[str, str]:
    """Labels of a pool's PodTemplates and requests: the project, the pool and its Dask cluster."""
    return {**contract.COMMON_LABELS, **MANAGED_BY, contract.DASK_POOL_LABEL: pool, CLUSTER_LABEL: cluster}


def consume_annotations(request: str) -> dict[str, str]:
    """The pod annotations that make a pod consume ``request``'s capacity."""
    return {CONSUME_ANNOTATION: request, CLASS_ANNOTATION: PROVISIONING_CLASS}


def node_selector(pool: str) -> dict[str, str]:
    """The node label selecting ``pool``'s own GKE node pool, as GKE's queued-provisioning templates do."""
    return {gpu_options.NODE_POOL_LABEL: gpu_options.node_pool_name(pool)}


def worker_pod_spec(group: Mapping[str, Any]) -> Manifest:
    """A copy of the pod spec a DaskWorkerGroup's workers run with (``spec.worker.spec``)."""
    try:
        return copy.deepcopy(dict(group["spec"]["worker"]["spec"]))
    except (KeyError, TypeError):
        name = (group.get("metadata") or {}).get("name", "?")
        raise ValueError(f"worker group {name} has no spec.worker.spec") from None


def build_pod_template(
    name: str, pool: str, cluster: str, pod_spec: Mapping[str, Any],
    pod_labels: Mapping[str, str] | None = None, namespace: str = contract.COMPUTE_NAMESPACE,
) -> Manifest:
    """The PodTemplate a request points at: ``pod_spec`` as is, so GKE sizes nodes for exactly these pods."""
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**object_labels(pool, cluster), WARDEN_LABEL[0]: WARDEN_LABEL[1]},
        },
        "template": {
            "metadata": {"labels": dict(pod_labels or {})},
            "spec": copy.deepcopy(dict(pod_spec)),
        },
    }


def build_provisioning_request(
    name: str, pool: str, cluster: str, workers: int, max_run_duration_s: int | None = None,
    namespace: str = contract.COMPUTE_NAMESPACE,
) -> Manifest:
    """A queued-provisioning request for ``workers`` pods of the PodTemplate of the same name.

    ``max_run_duration_s`` bounds how long the request's nodes live (GKE's default and limit: 7 days); it
    cannot be changed once the request exists. Raises ValueError for a count below 1 or a duration outside
    1..7 days.
    """
    if workers < 1:
        raise ValueError(f"a request covers at least one pod, not {workers}")
    spec: Manifest = {
        "provisioningClassName": PROVISIONING_CLASS,
        # GKE supports one PodSet per queued request; the pool's workers are all alike anyway.
        "podSets": [{"count": workers, "podTemplateRef": {"name": name}}],
    }
    if max_run_duration_s is not None:
        if not 1 <= max_run_duration_s <= gpu_options.MAX_RUN_DURATION_S:
            raise ValueError(f"maxRunDurationSeconds must be 1..{gpu_options.MAX_RUN_DURATION_S}, "
                             f"not {max_run_duration_s}")
        # Request parameters are strings in the API (a map of string to string).
        spec["parameters"] = {MAX_RUN_DURATION_PARAMETER: str(max_run_duration_s)}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": object_labels(pool, cluster)},
        "spec": spec,
    }


def build_provisioning(
    group: Mapping[str, Any], pool: str, cluster: str, name: str, workers: int,
    max_run_duration_s: int | None = None, namespace: str = contract.COMPUTE_NAMESPACE,
) -> tuple[Manifest, Manifest]:
    """The PodTemplate and the ProvisioningRequest for ``workers`` more workers of the DaskWorkerGroup ``group``.

    The template's pod spec is the group's worker pod spec and its labels the workers' labels; create the
    template first, since the request refers to it by name.
    """
    worker = group["spec"]["worker"]
    pod_labels = (worker.get("metadata") or {}).get("labels")
    template = build_pod_template(name, pool, cluster, worker_pod_spec(group), pod_labels, namespace)
    request = build_provisioning_request(name, pool, cluster, workers, max_run_duration_s, namespace)
    return template, request
