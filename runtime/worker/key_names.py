"""Dask's memo of task-key prefixes, emptied now and then in every Dask process the platform runs.

Dask names a task's prefix by splitting its key (``dask.utils.key_split``), and memoises the split with
``functools.lru_cache(100000)``: the Dask scheduler calls it for every new task, each worker for every task
it receives. Every job here is a task of its own key (``gpurt-<attempt>-<job_id>-<nonce>``), so the memo
gains one entry per job, about 0.26 kB, and is full only after 100,000 jobs: some 26 MB in each of those
processes. A 52,000-job soak measured it as the gpu-scheduler's (with the local Dask scheduler in it)
linear growth of +2.7 MB per 10,000 jobs, and tracemalloc named ``key_split`` as the site that kept one
block per job. Splitting a key again costs microseconds, so emptying the memo costs nothing measurable.

``forget_key_names`` runs on the Dask scheduler with the backend's clean-up round
(``Client.run_on_scheduler``); ``ForgetKeyNames`` is a worker plugin that empties each worker's memo on a
timer, on workers that join later too.
"""

from __future__ import annotations

from typing import Any, Final

from distributed import WorkerPlugin

# How often a worker empties its memo (seconds): at a few hundred jobs a second it holds at most some
# thousands of keys, well under a megabyte.
WORKER_PERIOD_S: Final = 60.0


def forget_key_names(dask_scheduler: Any = None) -> int:
    """Empty this process's memo of key prefixes; returns how many keys it held.

    ``dask_scheduler`` is what ``Client.run_on_scheduler`` passes; the memo is the process's, not the
    scheduler's, so it is not used.
    """
    from dask.utils import key_split

    held = key_split.cache_info().currsize
    key_split.cache_clear()
    return held


class ForgetKeyNames(WorkerPlugin):
    """Empties the worker's memo of key prefixes every ``period_s`` seconds, on the worker's event loop."""

    name = "gpurt-forget-key-names"

    def __init__(self, period_s: float = WORKER_PERIOD_S) -> None:
        self.period_s = period_s
        self._callback: Any = None

    def setup(self, worker: Any) -> None:
        """Start the timer on the worker's loop."""
        from tornado.ioloop import PeriodicCallback

        self._callback = PeriodicCallback(forget_key_names, self.period_s * 1000)
        self._callback.start()

    def teardown(self, worker: Any) -> None:
        """Stop the timer."""
        if self._callback is not None:
            self._callback.stop()
