"""Whether the result store works, as a circuit breaker that stops intake while it does not.

A job whose result cannot be stored must not give its message back: a nack burns one of the five
delivery attempts, and a store outage of minutes would burn them all (the dead-letter policy counts
every delivery). So the first ``StoreUnavailable`` a job meets *opens* the breaker:

- the scheduler stops intake exactly as a maintenance drain does (``Service`` calls the consumer's
  ``drain``; nothing is nacked) and ``/readyz`` answers 503 naming the store;
- every job that meets the outage waits in ``wait_out`` with its message unsettled, so the client's
  leaser keeps extending its lease (up to the consumer's ``MAX_LEASE_S``);
- a probe thread writes and removes a small object in the store's job folders every ``PROBE_PERIOD_S``;
  the first probe that succeeds *closes* the breaker: the waiting jobs try their write again and intake
  resumes (unless an operator drained the replica meanwhile).

A write that fails again after a probe succeeded (a store that flaps) opens the breaker again; the
probe period bounds how often that can happen, so there is no hot retry loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Final

from runtime.scheduler.store import StoreUnavailable

# How often an open breaker probes the store (seconds): a few small writes per replica, so cheap,
# and short against the outages it rides out (minutes).
PROBE_PERIOD_S: Final = 2.0

log = logging.getLogger(__name__)


class StoreHealth:
    """Circuit breaker over the result store; ``on_change`` is called (on its own thread) when it opens or closes.

    ``on_change`` takes no argument: it reads ``available`` itself, so two changes in quick succession can
    never be applied in the wrong order.
    """

    def __init__(self, probe: Callable[[], None], on_change: Callable[[], None],
                 probe_period_s: float = PROBE_PERIOD_S) -> None:
        self._probe = probe
        self._on_change = on_change
        self._period = probe_period_s
        self._cond = threading.Condition()
        self._reason: str | None = None  # why the store is unavailable; None while it works
        self._since: float | None = None  # time.time() the breaker opened
        self._probing = False
        self._closed = False

    @property
    def available(self) -> bool:
        """Whether the store works, as far as this replica knows."""
        with self._cond:
            return self._reason is None

    @property
    def reason(self) -> str | None:
        """Why the store is unavailable (the last error seen), or None."""
        with self._cond:
            return self._reason

    @property
    def unavailable_since(self) -> float | None:
        """When (``time.time()``) the breaker opened, or None while the store works."""
        with self._cond:
            return self._since

    def trip(self, error: Exception) -> None:
        """Record that the store failed; the first failure opens the breaker and starts the probe."""
        with self._cond:
            if self._closed:
                return
            opened = self._reason is None
            self._reason = str(error)
            if opened:
                self._since = time.time()
            start_probe = not self._probing
            self._probing = True
        if start_probe:
            threading.Thread(target=self._probe_until_back, name="gpurt-store-probe", daemon=True).start()
        if opened:
            log.error("result store unavailable, intake stops until a probe succeeds: %s", error)
            self._notify()

    def wait_out(self, error: StoreUnavailable) -> None:
        """The store's outage handler: open the breaker, block until it closes; re-raise ``error`` on ``close``."""
        self.trip(error)
        with self._cond:
            self._cond.wait_for(lambda: self._reason is None or self._closed)
            if self._reason is not None:
                raise error  # shutting down: the delivery is given back

    def close(self) -> None:
        """Stop probing and release every waiting job (for shutdown)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _probe_until_back(self) -> None:
        while True:
            with self._cond:
                if self._cond.wait_for(lambda: self._closed, timeout=self._period):
                    self._probing = False
                    return
            try:
                self._probe()
            except Exception as exc:  # any failure of the probe means: not back yet
                with self._cond:
                    self._reason = str(exc)
                continue
            with self._cond:
                down_s = time.time() - (self._since or time.time())
                self._reason = self._since = None
                self._probing = False
                self._cond.notify_all()
            log.warning("result store available again after %.0f s: intake resumes", down_s)
            self._notify()
            return

    def _notify(self) -> None:
        # On its own thread: stopping intake waits for the stream to close (up to seconds), which must
        # hold up neither the job that met the outage nor the probe.
        threading.Thread(target=self._on_change, name="gpurt-store-intake", daemon=True).start()
