"""Start and stop the emulator: a gRPC server for Publisher and Subscriber over one broker, plus the
optional admin HTTP port."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc

from runtime.emulator.admin import AdminServer
from runtime.emulator.clock import Clock
from runtime.emulator.publisher import PublisherService
from runtime.emulator.state import Broker
from runtime.emulator.stats import EmulatorStats
from runtime.emulator.subscriber import SubscriberService

log = logging.getLogger(__name__)

# Every open StreamingPull holds one worker thread, and a waiting unary Pull holds one for up to 10 s;
# 64 leaves room for every process of the local platform with several streams each.
MAX_WORKERS = 64
# Pub/Sub accepts publish requests of up to 10 MB; gRPC's default receive limit is 4 MiB.
MAX_MESSAGE_BYTES = 20 * 1024 * 1024
# On stop, in-flight RPCs get this long (s) to finish before they are cancelled.
STOP_GRACE_S = 1.0


@dataclass
class EmulatorHandle:
    """A running emulator. Point clients at it with ``PUBSUB_EMULATOR_HOST=handle.address``."""

    host: str
    port: int
    broker: Broker
    _server: grpc.Server
    _executor: ThreadPoolExecutor
    _admin: AdminServer | None = None

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
        self._server.stop(STOP_GRACE_S).wait()
        self._executor.shutdown(wait=False)
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
) -> EmulatorHandle:
    """Start an emulator on ``host:port`` (0 picks a free port) and return once it accepts connections.

    Emulator-only knobs: ``time_scale`` multiplies retry backoffs and retention, ``lease_time_scale`` ack
    deadlines (see runtime.emulator.clock); ``admin_port`` serves ``GET /stats`` (0 picks a free port,
    None serves none).
    """
    broker = Broker(Clock(time_scale, lease_time_scale))
    executor = ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="pubsub-emulator-rpc")
    server = grpc.server(
        executor,
        options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                 ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                 # gRPC sets SO_REUSEPORT by default: a second emulator on a taken port would silently share it.
                 ("grpc.so_reuseport", 0)],
    )
    server.add_generic_rpc_handlers((PublisherService(broker).handler(), SubscriberService(broker).handler()))
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
        admin = AdminServer(host, admin_port, broker.stats) if admin_port is not None else None
    except (RuntimeError, OSError) as error:
        server.stop(None)
        executor.shutdown(wait=False)
        broker.close()
        raise OSError(f"cannot listen on {host} (port {port}, admin port {admin_port}): {error}") from error
    server.start()
    if admin is not None:
        admin.start()
    handle = EmulatorHandle(host, bound, broker, server, executor, admin)
    log.info("pubsub emulator listening",
             extra={"address": handle.address, "admin_port": handle.admin_port, "time_scale": time_scale,
                    "lease_time_scale": lease_time_scale})
    return handle
