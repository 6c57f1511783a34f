"""The dask-kubernetes operator's vocabulary, declared once: its custom resources' API group, version, kinds
and plural names, and the labels it puts on the pods and Deployments it makes.

These are the operator's, not the project's (https://kubernetes.dask.org/en/latest/operator_resources.html);
the manifests build with them, the gpu-scheduler's pools patch and list by them, the RBAC grants and the IAM
proof name them, and validation reads the cluster with them.
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "kubernetes.dask.org"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

CLUSTER_KIND: Final = "DaskCluster"
WORKER_GROUP_KIND: Final = "DaskWorkerGroup"
AUTOSCALER_KIND: Final = "DaskAutoscaler"
JOB_KIND: Final = "DaskJob"

CLUSTER_PLURAL: Final = "daskclusters"
WORKER_GROUP_PLURAL: Final = "daskworkergroups"
AUTOSCALER_PLURAL: Final = "daskautoscalers"

# On the pods the operator creates (scheduler and workers alike), and on each worker Deployment.
CLUSTER_LABEL: Final = "dask.org/cluster-name"
COMPONENT_LABEL: Final = "dask.org/component"
WORKER_GROUP_LABEL: Final = "dask.org/workergroup-name"
