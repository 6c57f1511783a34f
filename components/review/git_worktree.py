"""A temporary ``git worktree`` of one commit: the program a rollback deploys or a plan diff reads.

The checkout itself is never touched, except that a commit missing from a shallow clone (CI checks out one
commit by default) is fetched from ``origin`` first: the rollback target is an older commit by definition.
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


def _has_commit(repo: Path, commit: str) -> bool:
    try:
        _git(repo, "cat-file", "-e", f"{commit}^{{commit}}")
    except WorktreeError:
        return False
    return True


def ensure_commit(repo: Path, commit: str, remote: str = "origin") -> None:
    """Make ``commit`` available in ``repo``, fetching that one commit from ``remote`` when it is missing.

    Raises ``WorktreeError`` naming the commit when neither the clone nor the remote has it.
    """
    if _has_commit(repo, commit):
        return
    try:
        # One commit, no history: enough for a worktree, and what a shallow CI clone can add cheaply.
        _git(repo, "fetch", "--quiet", "--no-tags", "--depth=1", remote, commit)
    except WorktreeError as exc:
        raise WorktreeError(f"commit {commit} is not in {repo} (a shallow clone?) and fetching it from "
                            f"{remote} failed: {exc}") from None
    if not _has_commit(repo, commit):
        raise WorktreeError(f"fetching {commit} from {remote} did not bring the commit")


@contextmanager
def worktree(repo: Path, commit: str) -> Iterator[Path]:
    """Check ``commit`` out (detached) into a temporary worktree; removed on exit, whatever happens."""
    ensure_commit(repo, commit)
    with tempfile.TemporaryDirectory(prefix="gpurt-rollback-") as tmp:
        path = Path(tmp) / "program"
        _git(repo, "worktree", "add", "--detach", str(path), commit)
        try:
            yield path
        finally:
            _git(repo, "worktree", "remove", "--force", str(path))
