"""The kernels' version: a digest of this package's source, which keys the scheduler's result cache.

A cached result may answer a request only when it was computed by the same kernels (docs/scheduler.md,
"Result cache"). A declared version string would have to be bumped by hand on every kernel change, and a
forgotten bump would let a result of the old kernels answer for the new ones; a digest of the sources changes
by itself with any edit to any module here (parameter defaults in ``params.py`` included).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Final


def source_digest(folder: Path) -> str:
    """SHA-256 (hex) over the ``.py`` files under ``folder``: each one's path relative to it, then its bytes.

    Sorted by path, so the digest is the same on every machine and filesystem; bytecode caches are left out.
    """
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*.py"), key=lambda p: p.relative_to(folder).as_posix()):
        if "__pycache__" in path.parts:
            continue
        name = path.relative_to(folder).as_posix().encode()
        data = path.read_bytes()
        # Lengths first, so no two different file sets run together into the same bytes.
        digest.update(len(name).to_bytes(8, "big") + name + len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


# Read once, when the kernels are imported: the version of the code this process runs.
KERNEL_VERSION: Final = source_digest(Path(__file__).parent)
