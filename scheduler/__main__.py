"""``python -m scheduler``: run the gpu-scheduler (consumer, API on GPURT_HOST:GPURT_PORT)."""

from __future__ import annotations

import logging
import sys

from scheduler.settings import Settings, SettingsError


def main() -> int:
    """Start the service, serve the API until SIGTERM/SIGINT, then drain and stop."""
    import uvicorn

    from scheduler import logs
    from scheduler.api import create_app
    from scheduler.http_limits import server_options
    from scheduler.service import Service

    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        print(f"gpu-scheduler: {exc}", file=sys.stderr)
        return 2
    logs.configure(settings.log_level)
    service = Service(settings)
    try:
        service.start()
    except Exception as exc:
        logging.getLogger("scheduler").exception("could not start: %s", exc)
        service.stop(timeout_s=0)
        return 1
    # uvicorn turns SIGTERM/SIGINT into a graceful shutdown, whose last step drains the service (in-flight
    # jobs finish and are acked). It re-raises the signal afterwards, so the stop must happen in there.
    try:
        uvicorn.run(create_app(service, on_shutdown=service.stop), host=settings.host, port=settings.port,
                    log_config=None, access_log=False, **server_options())
    finally:
        service.stop()  # idempotent: covers a server that failed to start
    return 0


if __name__ == "__main__":
    sys.exit(main())
