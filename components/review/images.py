"""The platform's own container images in a rendered stack: where each is referenced, and whether by digest.

Deploy by digest: the deploy workflow pushes each image, reads back the digest the registry answered, sets it
in the stack config (``images.*Digest``), and then refuses to run ``pulumi up`` unless every reference to an
image of the stack's Artifact Registry repository (Deployments, the DaskCluster and its worker groups, the
Vertex AI image setting) ends in ``@sha256:<digest>``. Together with the repository's immutable tags, a node
pulls exactly the bytes that were built. Third-party images are pinned the same way: the DCGM exporter in its
builder (``runtime.manifests.dcgm``), the Dask operator by the stack's ``images.operatorDigest`` (its chart's
``image.tag``); ``third_party`` finds them, and the gate refuses either without a digest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

# `<region>-docker.pkg.dev/<project>/<repository>/<image>...`: an image of an Artifact Registry repository.
REGISTRY_IMAGE: Final = re.compile(r"^[a-z0-9-]+-docker\.pkg\.dev/[^/\s]+/[^/\s]+/[^\s]+$")
PINNED: Final = re.compile(r"@sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class ImageReference:
    """One reference to an image of the stack's registry: in which resource, at which key, what it names."""

    resource: str
    path: str
    image: str

    @property
    def pinned(self) -> bool:
        """Whether the reference names its image by digest."""
        return bool(PINNED.search(self.image))


def _walk(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]")
    elif isinstance(value, str) and REGISTRY_IMAGE.match(value):
        yield path, value


def _walk_third_party(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            if key == "image" and isinstance(item, str) and not REGISTRY_IMAGE.match(item):
                yield here, item  # a container's image
            elif key == "image" and isinstance(item, Mapping) and "tag" in item:
                yield f"{here}.tag", f"{item.get('name', '')}:{item['tag']}"  # a Helm chart's image value
            else:
                yield from _walk_third_party(item, here)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk_third_party(item, f"{path}[{index}]")


def third_party(resources: Iterable[tuple[str, Mapping[str, Any]]]) -> list[ImageReference]:
    """Every image from another registry in the inputs of ``resources``: containers' ``image`` and Helm values'
    ``image: {name, tag}``."""
    return [ImageReference(name, path, image) for name, props in resources
            for path, image in _walk_third_party(props, "")]


def references(resources: Iterable[tuple[str, Mapping[str, Any]]]) -> list[ImageReference]:
    """Every reference to a registry image in the inputs of ``resources`` (name, inputs)."""
    return [ImageReference(name, path, image) for name, props in resources for path, image in _walk(props, "")]


def unpinned(resources: Iterable[tuple[str, Mapping[str, Any]]]) -> list[ImageReference]:
    """The references that name their image by tag alone, which the registry could resolve differently later."""
    return [ref for ref in references(resources) if not ref.pinned]
