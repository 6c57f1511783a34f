"""The Dask workers as the scheduler reports them, read at most once per ``ttl_s`` for per-job questions.

Whether the cluster has GPU workers decides a job's ``resources``; it changes when pools scale, not from
one job to the next, so asking the Dask scheduler for every job (``Client.scheduler_info`` is an RPC
that lists every worker) only adds a round trip to each job.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from runtime.protocol import contract

# How stale the per-job view may be (seconds): Dask's own client refreshes its scheduler view as often
# (distributed.client.scheduler-info-interval). A pool that just gained its first GPU workers is seen
# within this long; jobs submitted meanwhile run without the GPU resource, as before the workers came.
WORKERS_TTL_S: Final = 2.0

log = logging.getLogger(__name__)


class DaskWorkers:
    """Reads the workers from a ``distributed.Client``; ``has_gpus`` answers from a view at most ``ttl_s`` old."""

    def __init__(self, client: Any, ttl_s: float = WORKERS_TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._resources: frozenset[str] = frozenset()  # resource names any worker advertises
        self._read_at: float | None = None

    def read(self) -> list[dict[str, Any]]:
        """The workers now (one RPC), refreshing the cached view; empty if the scheduler cannot be read."""
        try:
            workers = list(self._client.scheduler_info().get("workers", {}).values())
        except Exception as exc:
            log.warning("cannot read Dask workers: %s", exc)
            workers = []
        advertised = frozenset(name for w in workers for name, amount in w.get("resources", {}).items() if amount)
        with self._lock:
            self._resources, self._read_at = advertised, self._clock()
        return workers

    def has_gpus(self) -> bool:
        """Whether any worker advertises the GPU resource, from a view at most ``ttl_s`` old."""
        return self.advertises(contract.DASK_GPU_RESOURCE)

    def advertises(self, resource: str) -> bool:
        """Whether any worker advertises ``resource``, from a view at most ``ttl_s`` old."""
        with self._lock:
            fresh = self._read_at is not None and self._clock() - self._read_at < self._ttl_s
            if fresh:
                return resource in self._resources
        self.read()
        with self._lock:
            return resource in self._resources

    def slots(self) -> int:
        """Jobs the workers can run at once now: the GPUs they advertise, or without any, their threads."""
        workers = self.read()
        gpus = sum(int(w.get("resources", {}).get(contract.DASK_GPU_RESOURCE, 0)) for w in workers)
        return gpus if gpus else sum(int(w.get("nthreads", 1)) for w in workers)
