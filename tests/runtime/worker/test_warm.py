"""Warm workers: a fresh Dask worker compiles every kernel as it starts, and its first kernel job runs only after."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from kernels.registry import KERNELS
from kernels.warm import WARM_JOBS
from runtime.protocol import contract
from runtime.protocol.contract import SchedulerEnv
from runtime.worker import warm as warm_worker
from tests.kernels.job_input import typed


def _cpu_kernels() -> dict[str, int]:
    """Every numba CPU kernel the kernel modules imported in this process define, with its compiled signatures."""
    from numba.core.registry import CPUDispatcher

    found = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("kernels."):
            dispatchers = {attr: value for attr, value in vars(module).items()
                           if isinstance(value, CPUDispatcher) and value.__module__ == name}
            # A helper only compiled kernels call is compiled into them: loaded from numba's cache, the caller
            # brings its machine code and the helper's own dispatcher stays empty. It counts as its callers.
            called = {callee for value in dispatchers.values() if value.signatures
                      for callee in value.py_func.__code__.co_names}
            for attr, value in dispatchers.items():
                found[f"{name}.{attr}"] = len(value.signatures) or int(attr in called)
    return found


def _kernel_modules() -> set[str]:
    return {name for name in sys.modules if name.startswith("kernels.")}


def _first_kernel_job() -> tuple[dict[str, int], set[str]]:
    """What a kernel job sees when it starts on the worker: past the gate every kernel job passes."""
    warm_worker.wait_warm()
    return _cpu_kernels(), _kernel_modules()


@contextmanager
def _worker(preload: list[str]) -> Iterator[Any]:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                      host="127.0.0.1", preload=preload, env={SchedulerEnv.DEVICE: "cpu"}) as cluster, \
            Client(cluster) as client:
        yield client


def test_the_preload_is_the_module_the_contract_names() -> None:
    assert warm_worker.__name__ == contract.DASK_WORKER_PRELOAD
    assert {job_type for _, job_type, _ in WARM_JOBS} == set(KERNELS)  # every kernel type is warmed


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_fresh_worker_has_every_kernel_compiled_before_its_first_job() -> None:
    with _worker([contract.DASK_WORKER_PRELOAD]) as client:
        kernels, loaded = client.submit(_first_kernel_job, pure=False).result(timeout=240)
        (warmed,) = client.run(warm_worker.warm_seconds).values()
    assert {entry.kernel_module for entry in KERNELS.values()} <= loaded  # every job type's kernel module
    assert kernels and all(signatures >= 1 for signatures in kernels.values()), kernels
    assert set(warmed) == {name for name, _, _ in WARM_JOBS}


def _primed(dask_worker: Any) -> list[int]:
    return sorted(getattr(dask_worker, warm_worker.PRIMED_ATTRIBUTE, ()))


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_after_the_compile_the_task_thread_is_readied_on_itself() -> None:
    import threading
    import time

    with _worker([contract.DASK_WORKER_PRELOAD]) as client:
        deadline = time.monotonic() + 240
        while not (primed := next(iter(client.run(_primed).values()))) and time.monotonic() < deadline:
            time.sleep(0.2)  # polling the worker: the compile takes seconds, then the thread's own call runs
        task_thread = client.submit(threading.get_ident, pure=False).result(timeout=60)
    assert primed == [task_thread]  # the one task thread, readied where the jobs run, not on the warm thread


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_without_the_preload_a_fresh_worker_is_cold() -> None:
    # The control for the test above: the same worker without the preload has compiled nothing.
    with _worker([]) as client:
        kernels, _ = client.submit(_first_kernel_job, pure=False).result(timeout=240)
        (warmed,) = client.run(warm_worker.warm_seconds).values()
    assert all(signatures == 0 for signatures in kernels.values()) and warmed == {}


@pytest.fixture
def warming(monkeypatch: pytest.MonkeyPatch) -> warm_worker._Warming:
    state = warm_worker._Warming()
    monkeypatch.setattr(warm_worker, "_WARMING", state)
    return state


def test_a_kernel_job_waits_for_the_compile_and_a_noop_does_not(warming: warm_worker._Warming,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime.worker import task as worker_task

    waited: list[str] = []
    monkeypatch.setattr(worker_task, "stop_poller", lambda *names: lambda: False)
    monkeypatch.setattr(warm_worker, "wait_warm", lambda should_stop: waited.append("waited"))
    worker_task.execute(*typed("noop", {}), "cpu", "event")
    assert waited == []
    worker_task.execute(*typed("european_option", {"paths": 64}), "cpu", "event")
    assert waited == ["waited"]


def test_waiting_for_the_compile_ends_when_it_is_done_or_the_job_is_cancelled(
        warming: warm_worker._Warming, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernels.errors import JobCancelled

    monkeypatch.setattr(warm_worker, "WARM_POLL_S", 0.01)
    warm_worker.wait_warm(lambda: True)  # no preload on this worker: nothing to wait for
    warming.started = True
    with pytest.raises(JobCancelled, match="kernels compiled"):
        warm_worker.wait_warm(lambda: True)
    warming.done.set()
    warm_worker.wait_warm(lambda: True)  # done: returns at once, cancelled or not
