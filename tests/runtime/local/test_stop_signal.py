"""``StopSignal``: SIGTERM ends the wait of a process's main thread, whenever it lands."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CHILD = """
from runtime.local.stop_signal import StopSignal
stop = StopSignal()
print("ready", flush=True)
print(stop.wait(), flush=True)
"""


@pytest.mark.timeout(60)
def test_sigterm_ends_the_wait_and_names_the_signal() -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGTERM)
        out, _ = child.communicate(timeout=30)
    finally:
        child.kill()
    assert child.returncode == 0 and out.strip() == str(int(signal.SIGTERM))

