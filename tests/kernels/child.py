"""The environment of a child process that imports the project's kernels (the simulator must be chosen before
numba.cuda is first imported, so simulated runs are children)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def child_env(*, simulated: bool) -> dict[str, str]:
    """This process's environment with the repository first on PYTHONPATH, keeping what was there (a GPU
    machine's carried packages live on it), and the CUDA simulator switched on or off."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if simulated:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    return env
