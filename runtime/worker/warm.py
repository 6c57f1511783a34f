"""Dask worker preload: compile every kernel as the worker starts, and run no kernel job before that is done
(docs/scheduler.md, "Warm workers").

The DaskCluster's workers load it with ``dask worker --preload`` (``contract.DASK_WORKER_PRELOAD``), the
local platform's through the LocalCluster's ``preload`` option. Dask runs a preload's ``dask_setup`` while
the worker starts; it starts one tiny job of each kernel type (``kernels.warm``) on a thread of its own, so
the compile begins before the worker has joined and a slow compile (a loaded machine, many CUDA kernels)
never holds up the worker's start or trips Dask's start-up timeouts. A kernel job the worker receives
meanwhile waits in ``wait_warm`` (``runtime.worker.task.execute``, ``runtime.worker.shards.execute_shard``)
until the compile is done, so no job's run time ever includes its kernel's compile; a ``noop`` job, which has
no kernel, does not wait. Once compiled, each of the worker's task threads runs the smallest warm-up job itself
(``kernels.warm.prime_thread``): the threading layer and CUDA's context are set up per thread, and the
first job of each thread would otherwise pay for it. Before compiling, it copies the CPU kernels the image
build compiled into the worker's numba cache (``runtime.worker.kernel_cache``), so that they load instead.

The device is ``GPURT_DEVICE`` of the worker's environment (the local platform passes the scheduler's);
unset, ``auto``: the GPU where there is one. The seconds each warm-up job took are kept on the worker
(``WARM_ATTRIBUTE``) for ``warm_seconds``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from kernels.errors import JobCancelled
from runtime.protocol.contract import SchedulerEnv

# The worker attribute that holds {warm-up job: seconds} once the kernels are warm.
WARM_ATTRIBUTE: Final = "gpurt_warm_s"
# The worker attribute that holds the idents of the task threads readied for kernels.
PRIMED_ATTRIBUTE: Final = "gpurt_primed_threads"
# How often a job waiting for the compile checks whether it was cancelled (seconds).
WARM_POLL_S: Final = 0.25

log = logging.getLogger(__name__)


class _Warming:
    """This worker process's warm-up: whether the preload started one, whether it is done, its device, and
    the idents of the threads readied for kernels since."""

    def __init__(self) -> None:
        self.started = False
        self.done = threading.Event()
        self.device = "auto"
        self.ready_threads: set[int] = set()


_WARMING: Final = _Warming()


def dask_setup(worker: Any) -> None:
    """Dask's preload hook: start compiling every kernel on this worker's device, on a thread of its own."""
    _WARMING.started = True
    _WARMING.device = os.environ.get(SchedulerEnv.DEVICE) or "auto"
    setattr(worker, PRIMED_ATTRIBUTE, _WARMING.ready_threads)
    threading.Thread(target=_warm, args=(worker,), name="gpurt-warm-kernels", daemon=True).start()


def _warm(worker: Any) -> None:
    from kernels.warm import warm_kernels
    from runtime.worker.kernel_cache import seed

    device = _WARMING.device
    started = time.perf_counter()
    try:
        seed()  # the image's compiled CPU twins, where it has them: loaded below instead of compiled
    except OSError:  # a full or unwritable cache folder: the kernels compile, as without a seed
        log.warning("could not copy the image's compiled kernels", exc_info=True)
    try:
        seconds = warm_kernels(device)
        setattr(worker, WARM_ATTRIBUTE, seconds)
        log.info("kernels warm on device %s in %.1f s: %s", device, time.perf_counter() - started,
                 ", ".join(f"{name} {s:.2f} s" for name, s in seconds.items()))
    finally:
        _WARMING.done.set()  # even after a failure: jobs then compile their own kernel, as without a preload
    _prime_task_threads(worker)


def _prime_task_threads(worker: Any) -> None:
    """Ready each of the worker's task threads for kernels, on that thread: one call per task thread is handed
    to the worker's executor (a job already waiting there readies its thread itself, in ``wait_warm``)."""
    executor = getattr(worker, "executors", {}).get("default")
    if executor is None:
        return
    for _ in range(worker.state.nthreads):
        executor.submit(_ready_this_thread)


def _ready_this_thread() -> None:
    """Run ``kernels.warm.prime_thread`` on the calling thread, once per thread (after the compile)."""
    ident = threading.get_ident()
    if ident in _WARMING.ready_threads:
        return  # every kernel job after the thread's first: nothing more on its path
    from kernels.warm import prime_thread

    try:
        prime_thread(_WARMING.device)
    except Exception:  # the thread's first job then pays it, as without it
        log.warning("could not ready a task thread on device %s", _WARMING.device, exc_info=True)
    _WARMING.ready_threads.add(ident)  # tried once: a failure would only fail again on every job


def wait_warm(should_stop: Callable[[], bool] = lambda: False) -> None:
    """Return once this worker's kernels are compiled and the calling thread is readied for them (at once
    where the preload did not run, or both are done).

    Raises ``JobCancelled`` when ``should_stop`` turns true while waiting.
    """
    if not _WARMING.started:
        return
    while not _WARMING.done.wait(WARM_POLL_S):
        if should_stop():
            raise JobCancelled("cancelled while the worker's kernels compiled")
    _ready_this_thread()  # a job that came during the compile readies its thread before its run is timed


def warm_seconds(dask_worker: Any) -> dict[str, float]:
    """What the preload measured on ``dask_worker`` (run it with ``Client.run``); empty until it is done."""
    return dict(getattr(dask_worker, WARM_ATTRIBUTE, {}))
