"""Which device a job runs on: ``auto`` (a GPU if numba sees one, else the CPU twin), ``cpu`` or ``gpu``.

With ``NUMBA_ENABLE_CUDASIM=1`` a GPU request runs the CUDA kernels in numba's simulator (``cudasim``):
the kernels' own code, interpreted, for tests at tiny sizes. Nothing here imports CUDA until asked.
"""

from __future__ import annotations

import os
from typing import Final

from kernels.errors import TransientJobError

CPU: Final = "cpu"
GPU: Final = "gpu"
CUDASIM: Final = "cudasim"
AUTO: Final = "auto"
CHOICES: Final = (AUTO, CPU, GPU)


class DeviceUnavailable(TransientJobError):
    """A GPU was requested where none exists; another worker may have one, so this is transient."""


def simulator_enabled() -> bool:
    """Whether numba's CUDA simulator is switched on for this process."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def gpu_available() -> bool:
    """Whether a real CUDA device (or the simulator) can run kernels here."""
    from numba import cuda

    return bool(cuda.is_available())


def resolve_device(requested: str = AUTO) -> str:
    """Map a requested device onto ``cpu``, ``gpu`` or ``cudasim``; raises ``ValueError`` for a bad name."""
    if requested not in CHOICES:
        raise ValueError(f"device must be one of {', '.join(CHOICES)}, not {requested!r}")
    if requested == CPU:
        return CPU
    if simulator_enabled():
        return CUDASIM
    if gpu_available():
        return GPU
    if requested == GPU:
        raise DeviceUnavailable("a GPU was requested but numba finds no CUDA device on this machine")
    return CPU
