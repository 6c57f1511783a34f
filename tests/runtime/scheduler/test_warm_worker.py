"""Warm workers: a fresh Dask worker has every kernel compiled before it takes its first job."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from components import contract
from kernels.jobs import _KERNEL_MODULES
from kernels.warm import WARM_JOBS
from runtime.scheduler.backends import warm_worker
from runtime.scheduler.settings import DEVICE_ENV

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]


def _cpu_kernels() -> dict[str, int]:
    """Every numba CPU kernel the kernel modules imported in this process define, with its compiled signatures."""
    from numba.core.registry import CPUDispatcher

    found = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("kernels."):
            for attr, value in vars(module).items():
                if isinstance(value, CPUDispatcher) and value.__module__ == name:
                    found[f"{name}.{attr}"] = len(value.signatures)
    return found


def _kernel_modules() -> set[str]:
    return {name for name in sys.modules if name.startswith("kernels.")}


@contextmanager
def _worker(preload: list[str]) -> Iterator[Any]:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                      host="127.0.0.1", preload=preload, env={DEVICE_ENV: "cpu"}) as cluster, \
            Client(cluster) as client:
        yield client


def test_the_preload_is_the_module_the_contract_names() -> None:
    assert warm_worker.__name__ == contract.DASK_WORKER_PRELOAD
    assert {job_type for _, job_type, _ in WARM_JOBS} == set(_KERNEL_MODULES)  # every kernel type is warmed


def test_a_fresh_worker_has_every_kernel_compiled_before_its_first_job() -> None:
    with _worker([contract.DASK_WORKER_PRELOAD]) as client:
        # Client.run is no task: the worker has run no job when it answers.
        assert client.who_has() == {}
        (kernels,) = client.run(_cpu_kernels).values()
        (warmed,) = client.run(warm_worker.warm_seconds).values()
        (loaded,) = client.run(_kernel_modules).values()
    assert set(_KERNEL_MODULES.values()) <= loaded  # every job type's kernel module
    assert kernels and all(signatures >= 1 for signatures in kernels.values()), kernels
    assert set(warmed) == {name for name, _, _ in WARM_JOBS}


def test_without_the_preload_a_fresh_worker_is_cold() -> None:
    # The control for the test above: the same worker without the preload has compiled nothing.
    with _worker([]) as client:
        (kernels,) = client.run(_cpu_kernels).values()
        (warmed,) = client.run(warm_worker.warm_seconds).values()
    assert all(signatures == 0 for signatures in kernels.values()) and warmed == {}
