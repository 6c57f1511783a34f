"""``python -m runtime.scheduler``: run the gpu-scheduler (consumer, API on GPURT_HOST:GPURT_PORT)."""

from __future__ import annotations

import logging
import sys

from runtime.protocol import contract
from runtime.scheduler.settings import Settings, SettingsError

# uvicorn's exit status for a server that could not start (uvicorn.main.STARTUP_FAILURE).
UVICORN_STARTUP_FAILURE = 3


def main() -> int:
    """Start the service, serve the API until SIGTERM/SIGINT, then drain and stop."""
    import uvicorn

    from runtime.scheduler import logs
    from runtime.scheduler.allocator import pin_mmap_threshold
    from runtime.scheduler.api import create_app, create_probe_app
    from runtime.scheduler.http_limits import server_options
    from runtime.scheduler.http_server import QuietServer
    from runtime.scheduler.probe_listener import ProbeListener, listen
    from runtime.scheduler.service import Service

    # First, so every large block the service allocates goes back to the OS when freed (runtime.scheduler.allocator).
    pin_mmap_threshold()
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        print(f"gpu-scheduler: {exc}", file=sys.stderr)
        return 2
    logs.configure(settings.log_level, settings.log_max_bytes)
    tracer = None
    if settings.tracemalloc_dir is not None:
        from runtime.scheduler.memory_trace import MemoryTracer

        # Before the service builds anything, so the baseline snapshot holds none of its state.
        tracer = MemoryTracer(settings.tracemalloc_dir, settings.tracemalloc_period_s, settings.tracemalloc_keep)
        try:
            tracer.start()
        except OSError as exc:
            print(f"gpu-scheduler: GPURT_TRACEMALLOC_DIR: cannot write snapshots to {settings.tracemalloc_dir}: "
                  f"{exc}", file=sys.stderr)
            return 2
    service = Service(settings)
    # uvicorn turns SIGTERM/SIGINT into a graceful shutdown, whose last step drains the service (in-flight
    # jobs finish and are acked). It re-raises the signal afterwards, so the stop must happen in there.
    config = uvicorn.Config(create_app(service, on_shutdown=service.stop), host=settings.host, port=settings.port,
                            log_config=None, access_log=False, **server_options())
    # The API's port is taken before the service starts: the local Dask cluster's processes bind ports the
    # kernel picks, and a restarted replica's port, just freed, could be one of them.
    try:
        listener = config.bind_socket()
    except SystemExit:  # uvicorn logs why (the port taken) and exits
        if tracer is not None:
            tracer.stop()
        return UVICORN_STARTUP_FAILURE
    # Listening holds the port against every other bind (a merely bound SO_REUSEADDR socket would not);
    # connections wait in the backlog until the server starts.
    listener.listen(config.backlog)
    probes = None
    if settings.probe_port is not None:
        try:
            probes = ProbeListener(create_probe_app(service), listen(settings.host, settings.probe_port,
                                                                     config.backlog))
        except OSError as exc:
            print(f"gpu-scheduler: {contract.SchedulerEnv.PROBE_PORT}: cannot listen on "
                  f"{settings.host}:{settings.probe_port}: {exc}", file=sys.stderr)
            listener.close()
            if tracer is not None:
                tracer.stop()
            return UVICORN_STARTUP_FAILURE
    try:
        service.start()
    except Exception as exc:
        logging.getLogger("runtime.scheduler").exception("could not start: %s", exc)
        service.stop(timeout_s=0)
        listener.close()
        if tracer is not None:
            tracer.stop()
        return 1
    server = QuietServer(config, probes=probes)
    try:
        server.run(sockets=[listener])
    except KeyboardInterrupt:  # the SIGINT uvicorn re-raises after its graceful shutdown, as uvicorn.run has it
        pass
    finally:
        service.stop()  # idempotent: covers a server that failed to start
        if tracer is not None:
            tracer.stop()  # the last snapshot, after the drain
    # A server that never started (its port taken) exits as uvicorn.run would.
    return 0 if server.started else UVICORN_STARTUP_FAILURE


if __name__ == "__main__":
    sys.exit(main())
