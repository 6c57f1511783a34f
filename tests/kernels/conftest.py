"""Kernel tests: tests marked ``gpu`` run the real CUDA kernels and are skipped without a CUDA device."""

from __future__ import annotations

from statistics import NormalDist

import pytest

from kernels.device import simulator_enabled

# Two-sided tail of "within 3 standard errors" for one comparison.
THREE_SIGMA_TAIL = 2.0 * (1.0 - NormalDist().cdf(3.0))


def bonferroni_z(comparisons: int) -> float:
    """Standard errors allowed per comparison so ``comparisons`` of them together keep the 3-sigma tail."""
    return NormalDist().inv_cdf(1.0 - THREE_SIGMA_TAIL / (2.0 * comparisons))


def _real_gpu() -> bool:
    if simulator_enabled():
        return False
    from numba import cuda

    return bool(cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``gpu``-marked tests where numba finds no CUDA device."""
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and not _real_gpu():
        skip = pytest.mark.skip(reason="no CUDA device: numba.cuda.is_available() is false")
        for item in gpu_items:
            item.add_marker(skip)
