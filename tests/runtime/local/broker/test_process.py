"""The builtin emulator as its own process, and the default clients on it (the benchmark's and tests' way in)."""

from __future__ import annotations

import os

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
    assert process.returncode is not None  # stopped and reaped


def test_a_process_that_does_not_start_is_an_error_with_its_exit_status() -> None:
    with pytest.raises(RuntimeError, match=r"did not start \(exit status 2\)"), \
            builtin_process("--no-such-option"):
        pass
