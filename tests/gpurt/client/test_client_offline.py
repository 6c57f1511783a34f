"""What a client says where there is no platform, before any network wait."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from gpurt.client import Client, PlatformNotRunning, QueueError
from runtime.access.local_state import LOCAL_DIR_ENV
from tests.gpurt.client.conftest import TARGET_VARIABLES


@pytest.fixture
def nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No variables and a folder where no platform was ever started."""
    for name in TARGET_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(LOCAL_DIR_ENV, str(tmp_path))
    return tmp_path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_no_platform_anywhere_says_how_to_start_one(nowhere: Path) -> None:
    with pytest.raises(PlatformNotRunning) as caught:
        Client()
    message = str(caught.value)
    assert "gpurt local up" in message and "GPURT_PROJECT" in message and "\n" not in message
    assert str(nowhere) in message and LOCAL_DIR_ENV in message  # where it looked, and how to look elsewhere


def test_a_platform_that_stopped_says_how_to_start_it(nowhere: Path) -> None:
    address = f"127.0.0.1:{_free_port()}"  # nothing listens there, as after a crash
    with pytest.raises(PlatformNotRunning) as caught:
        Client(emulator_host=address)
    message = str(caught.value)
    assert address in message and "gpurt local up" in message and "\n" not in message


def test_a_queue_name_no_queue_can_have_is_refused_before_anything_is_opened(nowhere: Path) -> None:
    # Refused before the platform is looked for: the error names the queue, not the missing platform.
    with pytest.raises(QueueError, match="'Rates_Desk' must be a lowercase DNS label"):
        Client(queue="Rates_Desk")
