"""What each container image installs, read from ``uv.lock``, and its compressed size from the locked wheels.

An image's Python layer is the wheels ``uv sync --frozen --no-dev --extra <extra>`` installs for the images'
platform (CPython 3.11 on linux/amd64, glibc 2.36: the Dockerfiles' base). ``uv.lock`` records every wheel with
its size, so the layer's compressed size is known before anything is built: the sum of the chosen wheels
(zip-compressed, as close to the gzip'd layer as the lock can say). The base image is not in the lock and is
not counted. Scale-from-zero GPU nodes pull the worker image before their first job, hence the targets.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from packaging.markers import Marker
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import parse_wheel_filename

ROOT_PROJECT: Final = "gpu-runtime"
LOCK_FILE: Final = Path(__file__).resolve().parents[2] / "uv.lock"
# image -> the extras its Dockerfile installs (docker/*.Dockerfile).
IMAGE_EXTRAS: Final = {"gpu-scheduler": ("scheduler",), "gpu-worker": ("gpu",)}
# Compressed-size targets (bytes): a node scaling from zero pulls the image before its first job.
TARGETS: Final = {"gpu-scheduler": 150_000_000, "gpu-worker": 1_500_000_000}
# The images' interpreter and platform (python:3.11.14-slim-bookworm on linux/amd64).
ENVIRONMENT: Final = {
    "implementation_name": "cpython", "implementation_version": "3.11.14", "os_name": "posix",
    "platform_machine": "x86_64", "platform_python_implementation": "CPython", "platform_release": "",
    "platform_system": "Linux", "platform_version": "", "python_full_version": "3.11.14", "python_version": "3.11",
    "sys_platform": "linux", "extra": "",
}
_GLIBC_MINOR: Final = 36  # bookworm's glibc 2.36
_PLATFORMS: Final = [*(f"manylinux_2_{minor}_x86_64" for minor in range(_GLIBC_MINOR, 4, -1)),
                     "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]


class LockError(ValueError):
    """The lock file cannot answer: a package or a wheel for the images' platform is missing."""


@dataclass(frozen=True)
class Installed:
    """One distribution an image installs, and the file it comes from."""

    name: str
    version: str
    file: str
    size: int


@dataclass(frozen=True)
class ImageSize:
    """An image's locked distributions and their compressed size against its target."""

    image: str
    packages: tuple[Installed, ...]
    target: int

    @property
    def size(self) -> int:
        """Bytes of the wheels (compressed) the image installs."""
        return sum(p.size for p in self.packages)

    @property
    def within_target(self) -> bool:
        """Whether the size is at most the target."""
        return self.size <= self.target

    def largest(self, count: int = 8) -> tuple[Installed, ...]:
        """The ``count`` biggest distributions, biggest first."""
        return tuple(sorted(self.packages, key=lambda p: -p.size)[:count])


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _tags() -> list[Tag]:
    """The wheel tags the images' interpreter accepts, most specific first."""
    return [*cpython_tags((3, 11), abis=["cp311"], platforms=_PLATFORMS),
            *compatible_tags((3, 11), interpreter="cp311", platforms=_PLATFORMS)]


class Lock:
    """A parsed ``uv.lock``: packages by name (and version, where several are locked)."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self._packages: dict[str, list[Mapping[str, Any]]] = {}
        for package in document.get("package", []):
            self._packages.setdefault(_normalise(package["name"]), []).append(package)
        self._priority = {tag: rank for rank, tag in enumerate(_tags())}

    @classmethod
    def read(cls, path: Path = LOCK_FILE) -> Lock:
        """Parse the lock file at ``path`` (this checkout's by default)."""
        return cls(tomllib.loads(path.read_text(encoding="utf-8")))

    def package(self, dependency: Mapping[str, Any]) -> Mapping[str, Any]:
        """The locked package a dependency entry names (by version where several are locked)."""
        name = _normalise(dependency["name"])
        candidates = self._packages.get(name, [])
        if "version" in dependency:
            candidates = [p for p in candidates if p.get("version") == dependency["version"]]
        if len(candidates) != 1:
            raise LockError(f"uv.lock: {len(candidates)} packages match dependency {dict(dependency)}")
        return candidates[0]

    def install_set(self, extras: tuple[str, ...]) -> list[Mapping[str, Any]]:
        """The packages ``uv sync --no-dev`` with ``extras`` installs on the images' platform, root excluded."""
        [root] = self._packages[ROOT_PROJECT]
        todo = [*root.get("dependencies", [])]
        todo += [d for extra in extras for d in root.get("optional-dependencies", {}).get(extra, [])]
        seen: dict[tuple[str, str], Mapping[str, Any]] = {}
        while todo:
            dependency = todo.pop()
            if "marker" in dependency and not Marker(dependency["marker"]).evaluate(ENVIRONMENT):
                continue
            if _normalise(dependency["name"]) == ROOT_PROJECT:  # an extra that includes another extra
                todo += [d for e in dependency.get("extra", []) for d in root["optional-dependencies"][e]]
                continue
            package = self.package(dependency)
            key = (_normalise(package["name"]), str(package.get("version")))
            extras_of = package.get("optional-dependencies", {})
            todo += [d for extra in dependency.get("extra", []) for d in extras_of.get(extra, [])]
            if key not in seen:
                seen[key] = package
                todo += package.get("dependencies", [])
        return sorted(seen.values(), key=lambda p: _normalise(p["name"]))

    def installed(self, package: Mapping[str, Any]) -> Installed:
        """The wheel the images' interpreter picks for ``package`` (the most specific tag wins)."""
        best: tuple[int, Mapping[str, Any]] | None = None
        for wheel in package.get("wheels", []):
            filename = str(wheel["url"]).rsplit("/", 1)[-1]
            _, _, _, tags = parse_wheel_filename(filename)
            rank = min((self._priority[t] for t in tags if t in self._priority), default=None)
            if rank is not None and (best is None or rank < best[0]):
                best = (rank, {**wheel, "filename": filename})
        if best is None:
            raise LockError(f"uv.lock has no wheel of {package['name']} {package.get('version')} for CPython 3.11 "
                            "on linux/amd64: the image would build it from source")
        wheel = best[1]
        return Installed(str(package["name"]), str(package.get("version")), str(wheel["filename"]),
                         int(wheel["size"]))


def image_sizes(lock: Lock) -> tuple[ImageSize, ...]:
    """Every image's locked distributions and compressed size."""
    return tuple(
        ImageSize(image, tuple(lock.installed(p) for p in lock.install_set(extras)), TARGETS[image])
        for image, extras in IMAGE_EXTRAS.items()
    )
