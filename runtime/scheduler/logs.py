"""JSON log lines (one object per line) carrying ``job_id`` and other context given as ``extra``; a throttle for
lines a client can make the process write at will; and a size cap for a log written to a file."""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import IO, Final, TextIO

# Attributes every LogRecord has; anything else on a record came from ``extra=`` and is logged.
_STANDARD: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Formats a record as ``{"time", "severity", "logger", "message", ...extra}`` (Cloud Logging reads it)."""

    def format(self, record: logging.LogRecord) -> str:
        """One JSON object."""
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "severity": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and value is not None:
                entry[key] = value if isinstance(value, str | int | float | bool) else str(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure(level: str, max_bytes: int | None = None) -> None:
    """Send all logging to stderr as JSON at ``level``; with ``max_bytes``, a stderr that is a file is capped."""
    handler: logging.StreamHandler[TextIO] = (
        logging.StreamHandler() if max_bytes is None else CappedStreamHandler(sys.stderr, max_bytes))
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # The Pub/Sub client logs every lease round at INFO; keep those out unless debugging.
    logging.getLogger("google.cloud.pubsub_v1").setLevel(max(logging.WARNING, logging.getLevelName(level)))


class Throttled:
    """At most one line per ``interval_s`` for an event a client can repeat at will (a refused connection).

    The first occurrence is logged at once; later ones within the interval are counted, and the next line
    says how many there were (``"... (1,204 times in the last 10 s)"``). Nothing is lost but the repetition.
    """

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: float | None = None
        self._count = 0

    def warning(self, logger: logging.Logger, message: str, *args: object) -> None:
        """Log ``message % args`` at WARNING with the count since the last line, or only count it."""
        now = self._clock()
        with self._lock:
            self._count += 1
            if self._last is not None and now - self._last < self._interval_s:
                return
            count, self._count, since, self._last = self._count, 0, self._last, now
        if since is None or count == 1:
            logger.warning(message, *args)
        else:
            logger.warning(message + " (%d times in the last %.0f s)", *args, count, now - since)


class CappedStreamHandler(logging.StreamHandler[TextIO]):
    """A ``StreamHandler`` whose stream, when it is a file, is kept under ``max_bytes``.

    The local platform starts each process with its standard streams appended to its log file, which every
    child inherits; none of them can be told to reopen it, so the file is capped in place, as logrotate's
    ``copytruncate`` does (https://man7.org/linux/man-pages/man8/logrotate.8.html): past ``max_bytes``, the
    newest half is kept, the rest dropped with one line saying so. Every writer appends (``O_APPEND``), so each
    goes on at the new end. Lines written by another process during the cut may be lost, as with copytruncate.
    """

    def __init__(self, stream: TextIO, max_bytes: int) -> None:
        super().__init__(stream)
        self._max_bytes = max_bytes

    def emit(self, record: logging.LogRecord) -> None:
        """Write the line, then cut the file if it passed its cap."""
        super().emit(record)
        try:
            cap_file(self.stream, self._max_bytes)
        except OSError:
            self.handleError(record)


def cap_file(stream: IO[str], max_bytes: int) -> bool:
    """Keep the file behind ``stream`` under ``max_bytes`` (its newest half kept); True if it was cut. A stream that
    is not a regular file (a terminal, a pipe) is left alone."""
    stream.flush()
    fd = stream.fileno()
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size <= max_bytes:
        return False
    keep = max_bytes // 2
    try:
        tail = os.pread(fd, keep, info.st_size - keep)
        tail = tail[tail.find(b"\n") + 1:]  # from the first whole line
    except OSError:  # opened write-only (not by the local platform): the cap holds, nothing is kept
        tail = b""
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps({"time": datetime.now(UTC).isoformat(), "severity": "WARNING", "logger": __name__,
                             "message": f"log cut at {max_bytes} bytes: the oldest "
                                        f"{info.st_size - len(tail)} bytes were dropped"}).encode() + b"\n" + tail)
    return True
