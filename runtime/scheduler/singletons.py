"""The background loop of every replica: leader election, and - on the leader only - the singletons.

Each period: tick the elector; sample backlog and DLQ depth; if leading, reconcile the pools and run
the DLQ reclaimer. One thread with an idempotent ``start``/``stop``; failures of one step are logged
and counted, never fatal to the loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Final, Protocol

from components import contract
from runtime.pubsub.depth import DepthSource
from runtime.scheduler.leader import RETRY_PERIOD_S
from runtime.scheduler.metrics import SchedulerMetrics

# The reclaimer and reconciler need not run every election round; backlog depth changes slowly too.
SINGLETON_PERIOD_S: Final = 10.0

log = logging.getLogger(__name__)


class Elector(Protocol):
    """``LeaderElector`` or ``AlwaysLeader``."""

    @property
    def is_leader(self) -> bool: ...

    def tick(self) -> bool: ...

    def release(self) -> None: ...


class SingletonLoop:
    """Runs election rounds every ``period_s`` and the leader's jobs every ``singleton_period_s``."""

    def __init__(self, elector: Elector, metrics: SchedulerMetrics, depth: DepthSource,
                 reconcile: Callable[[], None], reclaim: Callable[[], object],
                 period_s: float = RETRY_PERIOD_S, singleton_period_s: float = SINGLETON_PERIOD_S) -> None:
        self._elector = elector
        self._metrics = metrics
        self._depth = depth
        self._reconcile = reconcile
        self._reclaim = reclaim
        self._period = period_s
        self._singleton_period = singleton_period_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the loop thread (no-op if running)."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="gpurt-singletons", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop and release the lease so a standby takes over at once."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self._elector.release()
        self._metrics.leader.set(0)

    def run_once(self, with_singletons: bool = True) -> None:
        """One round (also what tests call)."""
        leading = self._elector.tick()
        self._metrics.leader.set(1 if leading else 0)
        self._sample_depth()
        if leading and with_singletons:
            self._step("pool reconciler", self._reconcile)
            if not self._step("DLQ reclaimer", self._reclaim):
                self._metrics.reclaimer_errors.inc()

    def _loop(self) -> None:
        rounds_per_singleton = max(1, round(self._singleton_period / self._period))
        count = 0
        while not self._stop.is_set():
            self.run_once(with_singletons=count % rounds_per_singleton == 0)
            count += 1
            self._stop.wait(self._period)

    def _sample_depth(self) -> None:
        for gauge, subscription in ((self._metrics.backlog, contract.REQUEST_SUBSCRIPTION),
                                    (self._metrics.dlq, contract.REQUEST_DLQ_SUBSCRIPTION)):
            try:
                depth = self._depth.undelivered(subscription)
            except Exception as exc:
                log.warning("cannot read the depth of %s: %s", subscription, exc)
                continue
            if depth is not None:
                gauge.set(depth)

    def _step(self, name: str, action: Callable[[], object]) -> bool:
        try:
            action()
            return True
        except Exception as exc:
            log.warning("%s failed: %s", name, exc)
            return False
