"""Start and stop the emulator: an asyncio gRPC server for Publisher and Subscriber over one broker, on an
event loop of its own thread, plus the optional admin HTTP port.

On the event loop a waiting Pull or an open StreamingPull holds no thread, so neither can exhaust a
pool and stall every other RPC (a thread-pool server stopped answering CreateTopic and Publish at
about 64 open streams).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from runtime.local.broker.access import AccessPolicy
from runtime.local.broker.admin import AdminServer
from runtime.local.broker.clock import Clock
from runtime.local.broker.journal import DATABASE_FILE, Journal
from runtime.local.broker.publisher import PublisherService
from runtime.local.broker.state import Broker
from runtime.local.broker.stats import EmulatorStats
from runtime.local.broker.subscriber import SubscriberService
from runtime.local.broker.unserved import UnservedServices

if TYPE_CHECKING:
    from runtime.local.broker.rest import RestServer

log = logging.getLogger(__name__)
T = TypeVar("T")

# What gRPC reads in before a handler sees it (its default is 4 MiB): no cap of its own. gRPC answers a message
# over its cap with RESOURCE_EXHAUSTED, which the client library retries until its deadline (120 s for a
# Publish); the service answers INVALID_ARGUMENT at once. So every request reaches runtime.local.broker.rpc,
# which refuses one over the 10 MB request limit by its size, before parsing it. The cost of a huge request is
# its bytes, held while it is refused (a client cannot serialize one of 2 GiB or more).
MAX_RECEIVE_BYTES = -1
# What the broker sends at most: a Pull or StreamingPull response is bounded by the messages it holds, each
# accepted within the 10 MB request limit.
MAX_SEND_BYTES = 64 * 1024 * 1024
# On stop, in-flight RPCs get this long (s) to finish before they are cancelled.
STOP_GRACE_S = 1.0
# Threads for the quick unary RPCs (waiting ones and streams run on the event loop and need none).
RPC_THREADS = 8
# Starting or stopping the server on its loop takes milliseconds; this bounds a wedged loop.
LOOP_CALL_TIMEOUT_S = 30.0


@dataclass
class EmulatorHandle:
    """A running emulator. Point clients at it with ``PUBSUB_EMULATOR_HOST=handle.address``."""

    host: str
    port: int
    broker: Broker
    _server: grpc.aio.Server
    _loop: _LoopThread
    _admin: AdminServer | None = None
    _rest: RestServer | None = None
    rest_port: int | None = None  # the REST (v1 JSON) and ``GET /`` port, if one was asked for

    @property
    def address(self) -> str:
        """``host:port`` of the gRPC endpoint."""
        return f"{self.host}:{self.port}"

    @property
    def admin_port(self) -> int | None:
        """Port of the emulator-only ``GET /stats`` endpoint, if one was asked for."""
        return self._admin.port if self._admin else None

    def stats(self) -> EmulatorStats:
        """Emulator-only counters: backlog, outstanding and dead-lettered per subscription."""
        return self.broker.stats()

    def stop(self) -> None:
        """Release waiting pullers and streams, stop serving, free the ports. Idempotent."""
        if self.broker.closed:
            return
        self.broker.close()
        if self._rest is not None:
            self._loop.call(self._rest.stop())
        self._loop.call(self._server.stop(STOP_GRACE_S))
        self._loop.close()
        if self._admin is not None:
            self._admin.stop()
        log.info("pubsub emulator stopped", extra={"address": self.address})

    def __enter__(self) -> EmulatorHandle:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_emulator(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    time_scale: float = 1.0,
    lease_time_scale: float = 1.0,
    admin_port: int | None = None,
    rest_port: int | None = None,
    data_dir: Path | None = None,
    credentials: Path | None = None,
) -> EmulatorHandle:
    """Start an emulator on ``host:port`` (0 picks a free port) and return once it accepts connections.

    Emulator-only knobs: ``time_scale`` multiplies retry backoffs and retention, ``lease_time_scale`` ack
    deadlines (see runtime.local.broker.clock); ``admin_port`` serves ``GET /stats`` (0 picks a free port,
    None serves none). ``rest_port`` serves the REST (v1 JSON) surface and ``GET /`` (same choices).
    ``data_dir`` makes the broker durable: it keeps its state in ``data_dir/broker.sqlite3`` and starts from
    what an earlier run left there (None: everything in memory). A file it cannot read is a ValueError,
    one it cannot open an OSError, each naming the file. ``credentials`` names a credentials file
    (runtime.local.broker.access): every call must then carry a token of it and be allowed by its bindings;
    None lets everyone do everything, as Google's emulator does. A file it cannot read is a ValueError.
    """
    policy = AccessPolicy.load(credentials) if credentials is not None else None
    clock = Clock(time_scale, lease_time_scale)
    broker = Broker(clock, Journal(data_dir / DATABASE_FILE) if data_dir is not None else None)
    loop = _LoopThread()
    server: grpc.aio.Server | None = None
    subscriber = SubscriberService(broker, policy)
    rest = None
    if rest_port is not None:
        from runtime.local.broker.rest import RestServer  # aiohttp is imported only when REST is asked for

        rest = RestServer(broker, subscriber, policy)
    try:
        server, bound = loop.call(_serve(broker, subscriber, host, port, loop.pool, policy))
        bound_rest = loop.call(rest.start(host, rest_port)) if rest is not None and rest_port is not None else None
        admin = AdminServer(host, admin_port, broker.stats) if admin_port is not None else None
    except (RuntimeError, OSError) as error:
        if rest is not None:
            loop.call(rest.stop())
        if server is not None:
            loop.call(server.stop(None))
        loop.close()
        broker.close()
        raise OSError(f"cannot listen on {host} (port {port}, admin port {admin_port}): {error}") from error
    if admin is not None:
        admin.start()
    handle = EmulatorHandle(host, bound, broker, server, loop, admin, rest, bound_rest)
    log.info("pubsub emulator listening",
             extra={"address": handle.address, "admin_port": handle.admin_port, "rest_port": handle.rest_port,
                    "time_scale": time_scale,
                    "lease_time_scale": lease_time_scale,
                    "data_dir": str(data_dir) if data_dir is not None else None,
                    "access": "by credentials" if policy is not None else "open to every caller"})
    return handle


async def _serve(broker: Broker, subscriber: SubscriberService, host: str, port: int,
                 pool: ThreadPoolExecutor, policy: AccessPolicy | None) -> tuple[grpc.aio.Server, int]:
    """Create, bind and start the gRPC server (on the loop it will serve from); returns it and its port."""
    server = grpc.aio.server(
        migration_thread_pool=pool,
        options=[("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
                 ("grpc.max_send_message_length", MAX_SEND_BYTES),
                 # gRPC sets SO_REUSEPORT by default: a second emulator on a taken port would silently share it.
                 ("grpc.so_reuseport", 0)],
    )
    server.add_generic_rpc_handlers(
        (PublisherService(broker, policy).handler(), subscriber.handler(), UnservedServices()))
    bound = server.add_insecure_port(f"{host}:{port}")
    await server.start()
    return server, bound


class _LoopThread:
    """An asyncio event loop running in a daemon thread, and the thread pool of its server's plain handlers."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(RPC_THREADS, thread_name_prefix="pubsub-emulator-rpc")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pubsub-emulator-loop", daemon=True)
        self._thread.start()

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and return its result (or raise its exception) here."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(LOOP_CALL_TIMEOUT_S)

    def close(self) -> None:
        """Stop the loop, wait for its thread and free it and the pool."""
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(LOOP_CALL_TIMEOUT_S)
        self._loop.close()
        self.pool.shutdown(wait=False)
