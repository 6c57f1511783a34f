"""Background threads of every replica: leader election, and - on the leader only - the singletons.

Two loops, so a slow singleton (a DLQ pull, a pool resize) can never delay a lease renewal:

- election, every ``RETRY_PERIOD_S``: tick the elector, publish the leader gauge;
- work, every ``SINGLETON_PERIOD_S``: sample backlog, DLQ and each request queue's depth; if leading, reconcile
  the pools and run the DLQ reclaimer.

``start``/``stop`` are idempotent; a failing step is logged and counted, never fatal to its loop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Final, Protocol

from runtime.leases.elector import RETRY_PERIOD_S
from runtime.protocol import contract
from runtime.protocol.queues import BUILT_IN_QUEUES, QueueSpec
from runtime.scheduler.messaging.depth import DepthSource
from runtime.scheduler.metrics import SchedulerMetrics

# The reclaimer and reconciler need not run every election round; backlog depth changes slowly too.
SINGLETON_PERIOD_S: Final = 10.0

log = logging.getLogger(__name__)


class Elector(Protocol):
    """``runtime.leases.elector.LeaderElector`` or ``AlwaysLeader``."""

    @property
    def is_leader(self) -> bool: ...

    def tick(self) -> bool: ...

    def release(self) -> None: ...


class AlwaysLeader:
    """The single local replica: leads from the start, no lease involved."""

    def __init__(self, identity: str, on_change: Callable[[bool], None] = lambda leading: None) -> None:
        self.identity = identity
        self._on_change = on_change
        self._leading = False

    @property
    def is_leader(self) -> bool:
        """True once ticked."""
        return self._leading

    @property
    def holder(self) -> str | None:
        """This replica."""
        return self.identity

    def tick(self) -> bool:
        """Lead."""
        if not self._leading:
            self._leading = True
            self._on_change(True)
        return True

    def release(self) -> None:
        """Step down on shutdown."""
        if self._leading:
            self._leading = False
            self._on_change(False)


class SingletonLoop:
    """Runs election rounds every ``period_s`` and the leader's work every ``singleton_period_s``."""

    def __init__(self, elector: Elector, metrics: SchedulerMetrics, depth: DepthSource,
                 reconcile: Callable[[], None], reclaim: Callable[[], object],
                 period_s: float = RETRY_PERIOD_S, singleton_period_s: float = SINGLETON_PERIOD_S,
                 queues: Sequence[QueueSpec] = BUILT_IN_QUEUES) -> None:
        self._elector = elector
        self._queues = tuple(queues)
        self._metrics = metrics
        self._depth = depth
        self._reconcile = reconcile
        self._reclaim = reclaim
        self._period = period_s
        self._singleton_period = singleton_period_s
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start both loops (no-op if running)."""
        if self._threads:
            return
        self._stop.clear()
        self.elect_once()  # lead (or not) before the first singleton round
        self._threads = [
            threading.Thread(target=self._every, args=(self._period, self.elect_once, False),
                             name="gpurt-election", daemon=True),
            threading.Thread(target=self._every, args=(self._singleton_period, self.work_once, True),
                             name="gpurt-singletons", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stop the loops and release the lease so a standby takes over at once."""
        if not self._threads:
            return
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads = []
        self._elector.release()
        self._metrics.leader.set(0)

    def elect_once(self) -> bool:
        """One election round."""
        leading = self._elector.tick()
        self._metrics.leader.set(1 if leading else 0)
        if not leading:
            # Only the leader reconciles pools and refreshes their gauge: a former leader's last values would
            # go stale and hide an empty pool from the workers-down alert (max over replicas).
            self._metrics.pool_workers.clear()
        return leading

    def work_once(self) -> None:
        """One round of depth sampling and, on the leader, the singletons."""
        self._sample_depth()
        if self._elector.is_leader:
            self._step("pool reconciler", self._reconcile)
            if not self._step("DLQ reclaimer", self._reclaim):
                self._metrics.reclaimer_errors.inc()

    def _every(self, period_s: float, action: Callable[[], object], at_once: bool) -> None:
        if at_once:
            action()
        while not self._stop.wait(period_s):
            action()

    def _sample_depth(self) -> None:
        queues = [(self._metrics.queue_depth.labels(queue.name), queue.subscription) for queue in self._queues]
        for gauge, subscription in ((self._metrics.backlog, contract.REQUEST_SUBSCRIPTION),
                                    (self._metrics.dlq, contract.REQUEST_DLQ_SUBSCRIPTION), *queues):
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
