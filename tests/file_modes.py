"""What a test asks of files that must be private to their user (0600 files, 0700 folders)."""

from __future__ import annotations

import stat
from pathlib import Path


def modes_open_to_others(root: Path) -> dict[str, str]:
    """Every folder and file at or under ``root`` that its group or others may use: relative path -> octal mode."""
    found = {}
    for path in (root, *root.rglob("*")):
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & 0o077 and not path.is_symlink():
            found[path.relative_to(root).as_posix()] = oct(mode)
    return found
