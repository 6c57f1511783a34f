"""The chaos drill's connection flood: one replica's API, then its probes' own port, held full of silent
connections while its probes are asked.

An attacker who can reach the API opens connections and sends nothing, and opens a new one as soon as the
server closes one. The API keeps its cap on open connections (``runtime/scheduler/http_limits.py``), so
while the flood lasts the API refuses everyone, its own on-call tools included. Before the probes had their
own listener, 500 such sockets for 60 s failed 88% of the replica's ``/healthz`` probes, and a kubelet
would have restarted it. Now the kubelet's probes (``GPURT_PROBE_PORT``) must all be answered within the
kubelet's timeout throughout, the load's jobs must run on (the ledger counts them: nothing lost, no wrong
answer), and the API must answer again once the flood stops. Then the probes' own port is flooded past its cap
for as long, with the same requirement: before that port closed its oldest silent connection to admit a new
one, such a flood failed every probe (``runtime/scheduler/http_limits.py``).
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from typing import Final, cast
from urllib.parse import urlparse

import httpx

from runtime.manifests.scheduler import PROBE_TIMEOUT_S
from runtime.protocol import contract
from validation.drills.base import POLL_S, DrillContext, wait_for
from validation.drills.faults import Fault, strike, target_replica

CONNECTION_FLOOD: Final = "connection flood"
# Long enough for a dozen probe rounds at the kubelet's pace, short beside the drill.
FLOOD_S: Final = 10.0
# Connections beyond the API's cap: these are the ones the server closes at once and the flood reopens.
EXTRA_CONNECTIONS: Final = 16
# How long the flood may take to fill the API's cap (seconds): loopback connections take microseconds each.
FILL_WAIT_S: Final = 10.0
# How often the drill asks the probes during the flood (seconds); the kubelet asks each one every 5 to 10 s.
PROBE_EVERY_S: Final = 0.5
# A flood connection the server closes is reopened after this pause (seconds), so a flood of a port that
# refuses connections does not spin.
_RECONNECT_PAUSE_S: Final = 0.01
_SELECT_S: Final = 0.1  # how often the flood's thread looks at its stop flag (seconds)
_CONNECT_TIMEOUT_S: Final = 2.0


class ConnectionFlood:
    """``connections`` silent TCP connections to ``host:port``, each reopened as soon as the server closes it.

    One thread owns every socket. Use as a context manager: leaving it stops the thread and closes every
    socket. ``opened`` and ``closed_by_server`` count connections since the start.
    """

    def __init__(self, host: str, port: int, connections: int) -> None:
        self._address = (host, port)
        self._connections = connections
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpurt-connection-flood", daemon=True)
        self._lock = threading.Lock()
        self._opened = 0
        self._closed_by_server = 0

    @property
    def opened(self) -> int:
        """Connections opened so far."""
        with self._lock:
            return self._opened

    @property
    def closed_by_server(self) -> int:
        """Connections the server closed so far (past its cap, or its deadline for a request head)."""
        with self._lock:
            return self._closed_by_server

    def __enter__(self) -> ConnectionFlood:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        try:
            while not self._stop.is_set():
                while len(selector.get_map()) < self._connections and not self._stop.is_set():
                    sock = self._connect()
                    if sock is None:
                        self._stop.wait(_RECONNECT_PAUSE_S)
                        break
                    selector.register(sock, selectors.EVENT_READ)
                for key, _ in selector.select(timeout=_SELECT_S):
                    sock = cast(socket.socket, key.fileobj)
                    if self._closed(sock):
                        selector.unregister(sock)
                        sock.close()
                        with self._lock:
                            self._closed_by_server += 1
        finally:
            for key in list(selector.get_map().values()):
                cast(socket.socket, key.fileobj).close()
            selector.close()

    def _connect(self) -> socket.socket | None:
        try:
            sock = socket.create_connection(self._address, timeout=_CONNECT_TIMEOUT_S)
        except OSError:
            return None
        sock.setblocking(False)
        with self._lock:
            self._opened += 1
        return sock

    @staticmethod
    def _closed(sock: socket.socket) -> bool:
        try:
            return sock.recv(4096) == b""  # the server sends nothing to a client that sent no request
        except BlockingIOError:
            return False
        except OSError:  # reset by the server
            return True


def probe(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> int | None:
    """``GET url`` on a new connection, as the kubelet probes: the HTTP status, or None without an answer."""
    try:
        return httpx.get(url, timeout=timeout_s, headers={"Connection": "close"}).status_code
    except httpx.HTTPError:
        return None


def connection_flood(ctx: DrillContext) -> Fault:
    """Flood the last replica's API, then its probes' own port, for ``FLOOD_S`` each; every probe must be
    answered throughout, and the API must come back."""
    record = target_replica(ctx)
    probe_port = record.env.get(contract.SchedulerEnv.PROBE_PORT)
    if not probe_port or not record.api_url:
        return Fault(
            CONNECTION_FLOOD,
            skipped=f"{record.name} has no probe listener (started by an older gpurt: "
            "`gpurt local down` and `gpurt local up`)",
        )
    api = urlparse(record.api_url)
    host, api_port = api.hostname or "127.0.0.1", api.port or contract.SCHEDULER_PORT
    probes = {path: f"http://{host}:{probe_port}{path}" for path in (contract.HEALTH_PATH, contract.READY_PATH)}
    api_health = f"{record.api_url}{contract.HEALTH_PATH}"
    answered: dict[str, list[int | None]] = {path: [] for path in probes}
    api_checks: list[int | None] = []
    fault = strike(ctx, CONNECTION_FLOOD)
    # One port at a time: the two floods together double what the replica's one event loop must turn away.
    with ConnectionFlood(host, api_port, contract.API_MAX_CONNECTIONS + EXTRA_CONNECTIONS) as flood:
        _ask_probes_under(flood, probes, answered, also=(api_health, api_checks))
    with ConnectionFlood(host, int(probe_port), contract.PROBE_MAX_CONNECTIONS + EXTRA_CONNECTIONS) as own:
        _ask_probes_under(own, probes, answered)
    wait_for(lambda: probe(api_health) == 200, ctx.timeout_s, f"{record.name}'s API to answer after the flood")
    fault.whole_at = time.monotonic()
    live = answered[contract.HEALTH_PATH]
    ready = answered[contract.READY_PATH]
    api_refused = sum(status is None for status in api_checks)
    fault.detail = (
        f"{flood.opened} silent connections to {record.name}'s API in {FLOOD_S:.0f}s "
        f"({flood.closed_by_server} closed by it; the API refused {api_refused} of {len(api_checks)} health "
        f"checks meanwhile), then {own.opened} to its probes' own port in {FLOOD_S:.0f}s ({own.closed_by_server} "
        f"closed by it); probes answered: /healthz {live.count(200)} of {len(live)}, /readyz "
        f"{sum(s is not None for s in ready)} of {len(ready)} ({ready.count(200)} ready)"
    )
    ctx.figures["connection flood: probes unanswered"] = len(live) - live.count(200) + sum(s is None for s in ready)
    ctx.figures["connection flood: API health checks refused"] = f"{api_refused} of {len(api_checks)}"
    if live.count(200) < len(live) or None in ready:
        fault.problems.append(f"{record.name}'s probes went unanswered during the connection flood: {fault.detail}")
    if not api_refused:
        fault.problems.append(
            f"the connection flood never filled {record.name}'s API (it proves nothing): {fault.detail}"
        )
    if not own.closed_by_server:
        fault.problems.append(
            f"the connection flood never filled {record.name}'s probes' port (it proves nothing): {fault.detail}"
        )
    return fault


def _ask_probes_under(flood: ConnectionFlood, probes: dict[str, str], answered: dict[str, list[int | None]],
                      also: tuple[str, list[int | None]] | None = None) -> None:
    """Once ``flood`` fills its port (or ``FILL_WAIT_S`` passed), ask every probe (and ``also``'s URL) at the
    kubelet's pace for ``FLOOD_S``, appending each answer."""
    filling = time.monotonic() + FILL_WAIT_S
    while not flood.closed_by_server and time.monotonic() < filling:
        time.sleep(POLL_S)
    end = time.monotonic() + FLOOD_S
    while time.monotonic() < end:
        for path, url in probes.items():
            answered[path].append(probe(url))
        if also is not None:
            also[1].append(probe(also[0]))
        time.sleep(PROBE_EVERY_S)  # the probes' pace, not a wait for a condition
