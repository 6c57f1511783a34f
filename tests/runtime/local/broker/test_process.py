"""The builtin emulator as its own process, and the default clients on it (the benchmark's and tests' way in)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.local.broker.process import builtin_process, default_clients

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_the_process_serves_the_default_clients_and_the_environment_is_restored_after() -> None:
    before = os.environ.get("PUBSUB_EMULATOR_HOST")
    with builtin_process() as (process, address), default_clients(address) as (publisher, _):
        assert os.environ["PUBSUB_EMULATOR_HOST"] == address
        topic = publisher.topic_path("gpurt-process", "requests")
        assert publisher.create_topic(name=topic).name == topic
    assert os.environ.get("PUBSUB_EMULATOR_HOST") == before
    assert process.returncode == 0  # stopped by SIGTERM, cleanly, and reaped


def test_a_process_that_does_not_start_is_an_error_with_its_exit_status() -> None:
    with pytest.raises(RuntimeError, match=r"did not start \(exit status 2\)"), \
            builtin_process("--no-such-option"):
        pass


WEDGED_STOP = """
import time
import runtime.local.broker.__main__ as broker
from runtime.local.broker.server import EmulatorHandle
broker.STOP_TIMEOUT_S = 1.0
EmulatorHandle.stop = lambda self: time.sleep(3600)  # a stop that never returns
broker.exit_now(broker.main(["--port", "0", "--log-level", "WARNING"]))
"""


def test_a_wedged_stop_writes_every_threads_stack_and_exits() -> None:
    process = subprocess.Popen([sys.executable, "-c", WEDGED_STOP], cwd=Path(__file__).resolve().parents[4],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().startswith("PUBSUB_EMULATOR_HOST=")
        process.terminate()
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 1
    assert "Timeout (0:00:01)!" in stderr and "in <lambda>" in stderr  # where the stop hung, in the log
    assert stderr.count("Thread 0x") >= 2  # every thread (the event loop's too), not only the main one
