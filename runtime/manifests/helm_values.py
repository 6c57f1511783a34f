"""Helm charts the platform installs, their pinned versions, and the values this project sets on them."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import version
from typing import Final

from runtime.manifests.common import RUN_AS_USER, Manifest, Resources


@dataclass(frozen=True)
class Chart:
    """A chart in a repository, at a version."""

    name: str
    repository: str
    version: str


def dask_operator_chart() -> Chart:
    """The dask-kubernetes operator at the version of the locked ``dask-kubernetes`` package.

    The CRD schemas the tests validate against ship inside that package, so the operator installed and
    the schemas checked cannot drift apart.
    """
    return Chart("dask-kubernetes-operator", "https://helm.dask.org", version("dask-kubernetes"))


OPERATOR_RESOURCES: Final = Resources(
    cpu_request="100m", memory_request="256Mi", cpu_limit="500m", memory_limit="512Mi"
)


def dask_operator_values() -> Manifest:
    """Operator values: resource limits and a pod context that passes the ``restricted`` Pod Security level.

    The chart already drops capabilities and runs as non-root; it leaves the pod without a seccomp
    profile, which ``restricted`` (enforced on ``compute``) refuses.
    """
    return {
        "resources": OPERATOR_RESOURCES.to_manifest(),
        "podSecurityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
