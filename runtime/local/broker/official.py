"""Google's official Pub/Sub emulator (Java, a gcloud CLI component) as a second broker.

The gcloud CLI ships it as ``platform/pubsub-emulator`` under the SDK root (Debian package
google-cloud-cli-pubsub-emulator); ``gcloud beta emulators pubsub start`` runs the same jar through
gcloud's Python wrapper. Starting the jar directly with ``java -jar`` saves that wrapper's second or so
and lets this module own the process. It has no admin view and no time scaling: only the Pub/Sub API.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

# Where the component lives under the SDK root, and the jar the launcher script runs.
EMULATOR_DIR: Final = Path("platform") / "pubsub-emulator"
JAR_GLOB: Final = "lib/cloud-pubsub-emulator-*-all.jar"
# The line the emulator logs once it accepts connections.
READY_LINE: Final = "Server started, listening on"
# The JVM starts the emulator in about a second on an idle machine; a loaded 2-core box needs more.
START_TIMEOUT_S: Final = 60.0
STOP_GRACE_S: Final = 10.0
LOG_LINES_KEPT: Final = 200  # enough to show why it failed to start
# The JVM's defaults reserve a quarter of the machine's memory; the emulator needs far less.
JVM_OPTIONS: Final = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


class OfficialEmulatorError(RuntimeError):
    """The official emulator is missing where it should be, or did not start; the message says why."""


@dataclass(frozen=True)
class OfficialEmulator:
    """An installed official emulator: the Java runtime and the emulator's jar."""

    java: str
    jar: Path

    def command(self, host: str, port: int) -> list[str]:
        """The command line that serves the emulator on ``host:port`` until SIGTERM."""
        return [self.java, *JVM_OPTIONS, "-jar", str(self.jar), f"--host={host}", f"--port={port}"]


def gcloud_path() -> str | None:
    """The gcloud CLI on PATH, if any."""
    return shutil.which("gcloud")


def find_official_emulator() -> OfficialEmulator | None:
    """The official emulator of the gcloud CLI on PATH; None where there is no gcloud.

    Raises OfficialEmulatorError where gcloud exists but the emulator component or Java does not, so a
    broken installation is reported rather than mistaken for "not available".
    """
    gcloud = gcloud_path()
    if gcloud is None:
        return None
    sdk_root = Path(os.path.realpath(gcloud)).parent.parent  # <sdk>/bin/gcloud
    jars = sorted((sdk_root / EMULATOR_DIR).glob(JAR_GLOB))
    if not jars:
        raise OfficialEmulatorError(
            f"gcloud is installed ({gcloud}) but its Pub/Sub emulator is not ({sdk_root / EMULATOR_DIR}); "
            "install it with `apt-get install google-cloud-cli-pubsub-emulator` or "
            "`gcloud components install pubsub-emulator`")
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if java is None or not Path(java).exists():
        raise OfficialEmulatorError("the official Pub/Sub emulator needs a Java runtime (17 or newer); "
                                    "install one, e.g. `apt-get install openjdk-17-jre-headless`")
    return OfficialEmulator(java=java, jar=jars[-1])


def free_port(host: str) -> int:
    """A TCP port free on ``host`` now: the emulator cannot pick one itself (``--port=0`` hides it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class OfficialEmulatorHandle:
    """A running official emulator started by this process."""

    host: str
    port: int
    process: subprocess.Popen
    log: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_LINES_KEPT))

    @property
    def address(self) -> str:
        """``host:port`` for ``PUBSUB_EMULATOR_HOST``."""
        return f"{self.host}:{self.port}"

    def stop(self) -> None:
        """SIGTERM the JVM, SIGKILL it after a grace period. Idempotent."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_GRACE_S)

    def __enter__(self) -> OfficialEmulatorHandle:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_official_emulator(emulator: OfficialEmulator, host: str = "127.0.0.1", port: int = 0,
                            timeout_s: float = START_TIMEOUT_S) -> OfficialEmulatorHandle:
    """Start ``emulator`` on ``host:port`` (0 picks a free port) and return once it accepts connections."""
    port = port or free_port(host)
    process = subprocess.Popen(emulator.command(host, port), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, text=True)
    handle = OfficialEmulatorHandle(host, port, process)
    ready = threading.Event()
    # The JVM's log must be read all along, or a full pipe would block it.
    threading.Thread(target=_read_log, args=(process.stdout, handle.log, ready), daemon=True,
                     name="official-pubsub-emulator-log").start()
    deadline = time.monotonic() + timeout_s
    while not ready.wait(0.05):
        if process.poll() is not None or time.monotonic() > deadline:
            handle.stop()
            reason = f"exited with {process.returncode}" if process.returncode is not None else \
                f"did not start within {timeout_s:.0f} s"
            raise OfficialEmulatorError(f"the official Pub/Sub emulator {reason}:\n" + "".join(list(handle.log)[-20:]))
    return handle


def _read_log(stream: IO[str] | None, lines: deque[str], ready: threading.Event) -> None:
    if stream is None:
        return
    with contextlib.closing(stream):
        for line in stream:
            lines.append(line)
            if READY_LINE in line:
                ready.set()
