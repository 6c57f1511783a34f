"""The registry digest lookup against a registry on loopback that behaves as ghcr.io does: an anonymous
request is answered 401 with a Bearer challenge, the challenge's realm hands out a pull token for the scope, and
the manifest is served by tag (with or without ``Docker-Content-Digest``)."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar
from urllib.parse import parse_qs, urlparse

import pytest
from typer.testing import CliRunner

from validation.adapters.registry import MANIFEST_TYPES, ImageReference, RegistryError, manifest_digest

NAME = "dask/dask-kubernetes-operator"
INDEX = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST_TYPES[0], "manifests": []}).encode()
TOKEN = "pull-token-for-" + NAME


class Registry(BaseHTTPRequestHandler):
    """Tags of one repository, behind token auth; ``send_digest`` False leaves the header out, as some do."""

    tags: ClassVar[dict[str, bytes]] = {"2026.3.0": INDEX}
    send_digest: ClassVar[bool] = True
    requests: ClassVar[list[tuple[str, str, str]]] = []

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _manifest(self, body: bool) -> None:
        url = urlparse(self.path)
        self.requests.append((self.command, url.path, self.headers.get("Accept", "")))
        if url.path == "/token":
            query = parse_qs(url.query)
            assert query["scope"] == [f"repository:{NAME}:pull"] and query["service"] == ["registry.test"]
            self._send(200, json.dumps({"token": TOKEN}).encode(), {"Content-Type": "application/json"})
            return
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            realm = f"http://{self.headers['Host']}/token"
            challenge = f'Bearer realm="{realm}",service="registry.test",scope="repository:{NAME}:pull"'
            self._send(401, b"", {"WWW-Authenticate": challenge})
            return
        tag = url.path.rsplit("/", 1)[-1]
        if not url.path.startswith(f"/v2/{NAME}/manifests/") or tag not in self.tags:
            self._send(404, b"", {})
            return
        content = self.tags[tag]
        headers = {"Content-Type": MANIFEST_TYPES[0]}
        if self.send_digest:
            headers["Docker-Content-Digest"] = f"sha256:{hashlib.sha256(content).hexdigest()}"
        self._send(200, content if body else b"", headers, length=len(content))

    def _send(self, status: int, body: bytes, headers: dict[str, str], length: int | None = None) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self) -> None:
        self._manifest(body=False)

    def do_GET(self) -> None:
        self._manifest(body=True)


@pytest.fixture
def registry() -> Iterator[str]:
    Registry.requests, Registry.send_digest = [], True
    server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_digest_comes_after_the_token_challenge(registry: str) -> None:
    digest = manifest_digest(f"{registry}/{NAME}:2026.3.0")
    assert digest == f"sha256:{hashlib.sha256(INDEX).hexdigest()}"
    # anonymous first, the token next, then the manifest asked for as an index before single manifests
    assert [(method, path) for method, path, _ in Registry.requests] == [
        ("HEAD", f"/v2/{NAME}/manifests/2026.3.0"), ("GET", "/token"), ("HEAD", f"/v2/{NAME}/manifests/2026.3.0")]
    assert Registry.requests[-1][2].startswith(MANIFEST_TYPES[0])


def test_without_the_header_the_digest_is_the_served_bytes(registry: str) -> None:
    Registry.send_digest = False
    assert manifest_digest(f"{registry}/{NAME}:2026.3.0") == f"sha256:{hashlib.sha256(INDEX).hexdigest()}"
    assert Registry.requests[-1][0] == "GET"


def test_a_missing_tag_or_registry_is_a_clear_error(registry: str) -> None:
    with pytest.raises(RegistryError, match="no such image or tag"):
        manifest_digest(f"{registry}/{NAME}:0.0.0")
    with pytest.raises(RegistryError, match="could not be reached"):
        manifest_digest("127.0.0.1:9/dask/op:1")  # the discard port: nothing listens
    with pytest.raises(RegistryError, match="already names a digest"):
        manifest_digest(f"{registry}/{NAME}:1@sha256:" + "ab" * 32)


def test_references_resolve_to_the_registry_that_serves_them() -> None:
    assert ImageReference.parse("ghcr.io/dask/op:1.0").manifest_url == "https://ghcr.io/v2/dask/op/manifests/1.0"
    assert ImageReference.parse("ubuntu:24.04") == ImageReference("registry-1.docker.io", "library/ubuntu", "24.04")
    assert ImageReference.parse("nvidia/cuda:12").host == "registry-1.docker.io"
    assert ImageReference.parse("localhost:5000/a/b:c").manifest_url == "http://localhost:5000/v2/a/b/manifests/c"


def test_gpurt_images_digest_prints_it_and_fails_clearly(registry: str) -> None:
    from gpurt.cli.app import app

    found = CliRunner().invoke(app, ["images", "digest", f"{registry}/{NAME}:2026.3.0"])
    assert found.exit_code == 0 and found.stdout.strip() == f"sha256:{hashlib.sha256(INDEX).hexdigest()}"
    missing = CliRunner().invoke(app, ["images", "digest", f"{registry}/{NAME}:9.9.9"])
    assert missing.exit_code == 1 and "no such image or tag" in missing.output
