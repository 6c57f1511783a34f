"""``python -m runtime.local.broker``: run the emulator until SIGTERM or SIGINT, logging JSON lines.

Prints ``PUBSUB_EMULATOR_HOST=host:port`` on stdout once it accepts connections, so a parent process
can wait for that line.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import sys
import time
from pathlib import Path

from runtime.local.stop_signal import StopSignal
from runtime.scheduler.logs import CappedStreamHandler

# Stopping takes a second (the gRPC server's grace, the journal's last write); a stop that takes longer than this
# is wedged: the process writes every thread's stack to stderr (its log) and exits with status 1.
STOP_TIMEOUT_S = 30.0
# LogRecord attributes that are not extra fields passed by the caller.
_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the record's extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as a JSON line."""
        line = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update({k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRS})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m runtime.local.broker", description="GPU Runtime Pub/Sub emulator")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=8085, help="gRPC port; 0 picks a free one (default 8085)")
    parser.add_argument("--admin-port", type=int, default=None,
                        help="emulator-only HTTP port serving GET /stats (default: none)")
    parser.add_argument("--rest-port", type=int, default=None,
                        help="HTTP port serving the REST (v1 JSON) API and GET / (default: none; 0 picks one)")
    parser.add_argument("--time-scale", type=float, default=1.0,
                        help="emulator-only: multiply retry backoffs and retention by this (default 1)")
    parser.add_argument("--lease-time-scale", type=float, default=1.0,
                        help="emulator-only: multiply ack deadlines by this (default 1; keep 1 for streaming "
                             "clients, which extend leases in real time)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="keep topics, subscriptions, snapshots and unacknowledged messages in "
                             "DATA_DIR/broker.sqlite3 and start from what it holds (default: memory only)")
    parser.add_argument("--credentials", type=Path, default=None,
                        help="a JSON file of tokens and Pub/Sub role bindings: every call must then carry "
                             "'authorization: Bearer <token>' and be allowed by a binding (default: open to "
                             "every caller, as Google's emulator is); see runtime/local/broker/access.py")
    parser.add_argument("--log-max-bytes", type=int, default=None,
                        help="when stderr is a file, keep it under this many bytes, dropping its oldest half "
                             "past that (default: no cap)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run until SIGTERM/SIGINT; return the exit status."""
    args = _parse_args(argv)
    handler = (logging.StreamHandler(sys.stderr) if args.log_max_bytes is None
               else CappedStreamHandler(sys.stderr, args.log_max_bytes))
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=args.log_level, handlers=[handler], force=True)
    logging.captureWarnings(True)  # library warnings become JSON lines too
    # Imported after logging is set up: the Google libraries warn at import time.
    from runtime.local.broker.memory import return_large_blocks
    from runtime.local.broker.server import start_emulator

    return_large_blocks()  # this process is the broker's alone: its messages' memory goes back when freed

    try:
        emulator = start_emulator(args.host, args.port, time_scale=args.time_scale,
                                  lease_time_scale=args.lease_time_scale, admin_port=args.admin_port,
                                  rest_port=args.rest_port, data_dir=args.data_dir,
                                  credentials=args.credentials)
    except ValueError as error:
        logging.getLogger(__name__).error("invalid option", extra={"error": str(error)})
        return 2
    except OSError as error:
        logging.getLogger(__name__).error("cannot start the emulator", extra={"error": str(error)})
        return 1
    stop = StopSignal()
    print(f"PUBSUB_EMULATOR_HOST={emulator.address}", flush=True)
    if emulator.rest_port is not None:
        print(f"PUBSUB_EMULATOR_REST=http://{args.host}:{emulator.rest_port}/v1", flush=True)
    if emulator.admin_port is not None:
        print(f"PUBSUB_EMULATOR_ADMIN=http://{args.host}:{emulator.admin_port}", flush=True)
    stop.wait()
    faulthandler.dump_traceback_later(STOP_TIMEOUT_S, exit=True)
    emulator.stop()
    faulthandler.cancel_dump_traceback_later()
    return 0


def exit_now(status: int) -> None:
    """Flush the logs and standard streams and end the process with ``status``, skipping the interpreter's
    finalization: everything the broker holds is closed by then, and what finalization would add is gRPC's
    asyncio shutdown run again while the interpreter tears down, which can hang a process that has nothing
    left to do (https://github.com/grpc/grpc/pull/40447)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    exit_now(main())
