"""Helm charts the platform installs, their pinned versions, and the values this project sets on them."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from functools import cache
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


# Where the locked dask-kubernetes package keeps its chart's CRDs (resolved: the pod templates inlined).
OPERATOR_CRD_DIR: Final = "operator/deployment/helm/dask-kubernetes-operator/crds"
# Server-side apply takes over fields another manager (Helm's first install) wrote, instead of conflicting.
PATCH_FORCE_ANNOTATION: Final = "pulumi.com/patchForce"


def dask_operator_crds() -> list[Manifest]:
    """The operator's CustomResourceDefinitions at the locked dask-kubernetes version, as the project applies them.

    Helm installs a chart's ``crds/`` once and never upgrades or deletes them
    (https://helm.sh/docs/chart_best_practices/custom_resource_definitions/), so an operator upgrade through
    the release alone would run the new controller against the old schemas. The Pulumi program applies these
    itself (the release skips its own), so bumping ``dask-kubernetes`` in ``uv.lock`` upgrades the CRDs and
    the operator in one ``pulumi up``, the CRDs first.

    Each call returns a fresh copy the caller may change.
    """
    # The schemas are parsed once per process: a render reads them twice (the Dask component applies them, the CI
    # preview role names them) and the tests render the program dozens of times in one process. Unpickling the
    # parsed tree copies it in C, a hundredth of the parse's CPU (a deep copy would take a third of it).
    return pickle.loads(_parsed_operator_crds())


@cache
def _parsed_operator_crds() -> bytes:
    """The locked package's CRD files parsed (with the patch-force annotation set), pickled."""
    from importlib.resources import files

    import yaml

    # 900 KB of schemas: libyaml's parser reads them in a tenth of the pure-Python one's time (4 s).
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    folder = files("dask_kubernetes") / OPERATOR_CRD_DIR
    crds = []
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if entry.name.endswith(".yaml"):
            crd = yaml.load(entry.read_text(), Loader=loader)
            annotations = crd["metadata"].setdefault("annotations", {})
            annotations[PATCH_FORCE_ANNOTATION] = "true"
            crds.append(crd)
    return pickle.dumps(crds)


# The operator's image as its chart names it (values.yaml: image.name); the chart renders `<name>:<tag>`.
OPERATOR_IMAGE: Final = "ghcr.io/dask/dask-kubernetes-operator"

OPERATOR_RESOURCES: Final = Resources(
    cpu_request="100m", memory_request="256Mi", cpu_limit="500m", memory_limit="512Mi"
)


def operator_image_tag(digest: str | None) -> str:
    """The chart's ``image.tag``: the locked version, pinned to ``digest`` when given (``<version>@sha256:…``, which
    the chart's ``<name>:<tag>`` turns into a reference by digest)."""
    release = version("dask-kubernetes")
    return f"{release}@{digest}" if digest else release


def operator_image_reference() -> str:
    """The operator's image at the locked version, by tag: what its digest is looked up for."""
    return f"{OPERATOR_IMAGE}:{operator_image_tag(None)}"


def dask_operator_values(image_digest: str | None = None) -> Manifest:
    """Operator values: its image (by digest when ``image_digest`` is given), resource limits and a pod context
    that passes the ``restricted`` Pod Security level.

    The chart already drops capabilities and runs as non-root; it leaves the pod without a seccomp
    profile, which ``restricted`` (enforced on ``compute``) refuses. The image is always named, so the deploy
    gate (``gpurt images pinned``) sees whether it is pinned.
    """
    return {
        "image": {"name": OPERATOR_IMAGE, "tag": operator_image_tag(image_digest)},
        "resources": OPERATOR_RESOURCES.to_manifest(),
        "podSecurityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
