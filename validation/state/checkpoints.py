"""Checkpoints of a self-managed (DIY) Pulumi backend, read through fsspec at file://, gs:// or s3:// URLs.

Each update of a DIY backend writes ``.pulumi/history/<project>/<stack>/<stack>-<unix nanos>.checkpoint.json``
holding ``{version, checkpoint: {stack, latest}}``. ``pulumi stack import`` wants ``{version, deployment}``:
the ``latest`` snapshot, rewrapped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from runtime.storage.filesystems import url_to_fs

# The deployment schema ``pulumi stack import`` accepts (apitype.DeploymentSchemaVersionCurrent).
DEPLOYMENT_SCHEMA_VERSION = 3
_CHECKPOINT_NAME = re.compile(r"-(\d+)\.checkpoint\.json$")


class CheckpointError(RuntimeError):
    """A checkpoint cannot be found or used; the message names the URL."""


@dataclass(frozen=True)
class CheckpointRef:
    """One history checkpoint: its position (1 = oldest), URL and timestamp (unix nanoseconds)."""

    version: int
    url: str
    timestamp_ns: int


def history_url(backend_url: str, project: str, stack: str) -> str:
    """The history folder of ``project/stack`` in the backend at ``backend_url``."""
    return f"{backend_url.rstrip('/')}/.pulumi/history/{project}/{stack}"


def list_checkpoints(backend_url: str, project: str, stack: str, **storage_options: Any) -> list[CheckpointRef]:
    """The stack's checkpoints, oldest first, numbered like the updates that wrote them."""
    folder = history_url(backend_url, project, stack)
    fs, path = url_to_fs(folder, **storage_options)
    try:
        names = fs.ls(path, detail=False)
    except FileNotFoundError:
        raise CheckpointError(f"no history at {folder}: check the backend URL, project and stack") from None
    found = []
    for name in names:
        match = _CHECKPOINT_NAME.search(name)
        if match and name.rsplit("/", 1)[-1].startswith(f"{stack}-"):
            found.append((int(match.group(1)), fs.unstrip_protocol(name)))
    found.sort()
    return [CheckpointRef(version=i, url=url, timestamp_ns=ts) for i, (ts, url) in enumerate(found, start=1)]


def read_checkpoint(url: str, **storage_options: Any) -> dict[str, Any]:
    """A checkpoint file as JSON."""
    fs, path = url_to_fs(url, **storage_options)
    try:
        with fs.open(path, "rt") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {url} does not exist") from None
    except ValueError as exc:
        raise CheckpointError(f"checkpoint {url} is not JSON: {exc}") from None


def rewrap(checkpoint: dict[str, Any], source: str = "checkpoint") -> dict[str, Any]:
    """``{version, checkpoint: {latest}}`` -> ``{version: 3, deployment: latest}`` for ``stack import``."""
    latest = (checkpoint.get("checkpoint") or {}).get("latest")
    if not isinstance(latest, dict):
        raise CheckpointError(f"{source} holds no deployment (checkpoint.latest is empty: a destroyed stack?)")
    return {"version": DEPLOYMENT_SCHEMA_VERSION, "deployment": latest}
