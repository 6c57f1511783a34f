"""Timestamped backups of a stack's exported state under ``.gpurt/state-backups/``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from validation.adapters.pulumi_stack import PulumiStack

DEFAULT_BACKUP_DIR = Path(".gpurt") / "state-backups"
# The export may hold decrypted secrets (--show-secrets): readable by the owner only.
BACKUP_FILE_MODE = 0o600


def backup_path(stack_name: str, directory: Path, now: datetime | None = None) -> Path:
    """``<dir>/<stack>-<UTC timestamp>.json``; a stack name like ``org/project/stack`` keeps its last part."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S%fZ")
    return directory / f"{stack_name.rsplit('/', 1)[-1]}-{stamp}.json"


def write_backup(state: Mapping[str, Any], stack_name: str, directory: Path) -> Path:
    """Write ``state`` to a new backup file (mode 0600) and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = backup_path(stack_name, directory)
    with open(path, "x", opener=_open_private) as handle:
        json.dump(state, handle, indent=2)
    return path


def _open_private(path: str, flags: int) -> int:
    return os.open(path, flags, BACKUP_FILE_MODE)


def backup_stack(stack: PulumiStack, directory: Path) -> Path:
    """Export the stack's current state into a new backup file."""
    return write_backup(stack.export(), stack.name, directory)


def read_backup(path: Path) -> dict[str, Any]:
    """A backup (or any ``pulumi stack export`` file) as a deployment document."""
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path} is not a readable state export: {exc}") from None
    if not isinstance(document, dict) or "deployment" not in document:
        raise ValueError(f"{path} is not a state export (no 'deployment' key)")
    return document
