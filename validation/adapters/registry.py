"""The digest a container registry serves for an image tag, read over the OCI distribution API.

A third-party image (the Dask operator's) is pinned by the digest its registry answers for the tag, looked up
once and committed, never resolved at deploy time (a moved tag would then deploy unreviewed bytes). The
lookup is ``HEAD /v2/<name>/manifests/<tag>`` with the manifest media types a multi-architecture image is
served as; the digest is the ``Docker-Content-Digest`` header, or the SHA-256 of the manifest's bytes where a
registry leaves the header out
(https://github.com/opencontainers/distribution-spec/blob/main/spec.md#pulling-manifests). Public registries
(ghcr.io, Docker Hub, nvcr.io) answer an anonymous request with 401 and a ``WWW-Authenticate: Bearer``
challenge, whose realm hands out a pull token for the named scope
(https://distribution.github.io/distribution/spec/auth/token/).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

import httpx

# An image index first: a multi-architecture tag's digest is its index's, which every platform resolves from.
MANIFEST_TYPES: Final = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
DIGEST: Final = re.compile(r"^sha256:[0-9a-f]{64}$")
_CHALLENGE_PARAM: Final = re.compile(r'(\w+)="([^"]*)"')
# Hosts served over plain HTTP, as Docker allows for a registry on this machine.
_LOCAL_HOSTS: Final = ("localhost", "127.0.0.1")
_DOCKER_HUB: Final = "registry-1.docker.io"
_TIMEOUT_S: Final = 30.0


class RegistryError(RuntimeError):
    """The registry did not give a digest for the reference, with its reason."""


@dataclass(frozen=True)
class ImageReference:
    """``host/name:tag`` split as the distribution API addresses it."""

    host: str
    name: str
    tag: str

    @classmethod
    def parse(cls, reference: str) -> ImageReference:
        """``ghcr.io/dask/op:1.0`` -> (ghcr.io, dask/op, 1.0); a bare ``name:tag`` is Docker Hub's."""
        if "@" in reference:
            raise RegistryError(f"{reference} already names a digest")
        path, _, tag = reference.rpartition(":")
        if not path or "/" in tag:
            raise RegistryError(f"{reference} names no tag (expected host/name:tag)")
        first, _, rest = path.partition("/")
        if rest and ("." in first or ":" in first or first in _LOCAL_HOSTS):
            return cls(first, rest, tag)
        return cls(_DOCKER_HUB, path if rest else f"library/{path}", tag)

    @property
    def manifest_url(self) -> str:
        """Where the tag's manifest is served."""
        scheme = "http" if self.host.split(":")[0] in _LOCAL_HOSTS else "https"
        return f"{scheme}://{self.host}/v2/{self.name}/manifests/{self.tag}"


def manifest_digest(reference: str, client: httpx.Client | None = None) -> str:
    """The ``sha256:…`` digest the registry serves for ``reference`` (``host/name:tag``) now."""
    image = ImageReference.parse(reference)
    own = client is None
    http = client or httpx.Client(timeout=_TIMEOUT_S, follow_redirects=True)
    headers = {"Accept": ", ".join(MANIFEST_TYPES)}
    try:
        response = http.head(image.manifest_url, headers=headers)
        if response.status_code == 401:
            headers["Authorization"] = f"Bearer {_pull_token(http, response, image)}"
            response = http.head(image.manifest_url, headers=headers)
        if response.status_code == 200 and not response.headers.get("Docker-Content-Digest"):
            response = http.get(image.manifest_url, headers=headers)  # the digest is then the bytes' own
        if response.status_code == 404:
            raise RegistryError(f"{reference}: no such image or tag in {image.host}")
        if response.status_code != 200:
            raise RegistryError(f"{reference}: {image.host} answered {response.status_code} {response.reason_phrase}")
        served = response.headers.get("Docker-Content-Digest")
        digest = served or f"sha256:{hashlib.sha256(response.content).hexdigest()}"
    except httpx.HTTPError as exc:
        raise RegistryError(f"{reference}: {image.host} could not be reached ({exc})") from None
    finally:
        if own:
            http.close()
    if not DIGEST.match(digest):
        raise RegistryError(f"{reference}: {image.host} answered the digest {digest!r}, not sha256:<64 hex>")
    return digest


def _pull_token(http: httpx.Client, challenge: httpx.Response, image: ImageReference) -> str:
    """An anonymous pull token from the realm the 401's ``WWW-Authenticate: Bearer`` challenge names."""
    header = challenge.headers.get("WWW-Authenticate", "")
    if not header.lower().startswith("bearer "):
        raise RegistryError(f"{image.host} wants credentials ({header or 'no challenge'}): only public images here")
    params = dict(_CHALLENGE_PARAM.findall(header))
    if "realm" not in params:
        raise RegistryError(f"{image.host}'s challenge names no token realm: {header}")
    query = {"scope": params.get("scope", f"repository:{image.name}:pull")}
    if "service" in params:
        query["service"] = params["service"]
    answer = http.get(params["realm"], params=query)
    if answer.status_code != 200:
        raise RegistryError(f"{image.host} refused a pull token for {image.name}: {answer.status_code}")
    body = answer.json()
    token = body.get("token") or body.get("access_token")
    if not token:
        raise RegistryError(f"{image.host}'s token realm answered no token")
    return str(token)
