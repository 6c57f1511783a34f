"""A temporary ``git worktree`` of one commit: the program a rollback deploys or a plan diff reads.

The checkout itself is never touched.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# git operations on a local repository; generous for a large checkout on a slow disk.
GIT_TIMEOUT_S = 120.0


class WorktreeError(RuntimeError):
    """git could not provide the commit; the message carries git's own explanation."""


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          timeout=GIT_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise WorktreeError(f"git {' '.join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


@contextmanager
def worktree(repo: Path, commit: str) -> Iterator[Path]:
    """Check ``commit`` out (detached) into a temporary worktree; removed on exit, whatever happens."""
    _git(repo, "cat-file", "-e", f"{commit}^{{commit}}")
    with tempfile.TemporaryDirectory(prefix="gpurt-rollback-") as tmp:
        path = Path(tmp) / "program"
        _git(repo, "worktree", "add", "--detach", str(path), commit)
        try:
            yield path
        finally:
            _git(repo, "worktree", "remove", "--force", str(path))
