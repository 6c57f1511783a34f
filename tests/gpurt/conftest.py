"""One running local platform shared by the CLI tests (those of this package, not the client's, which has its own),
with the emulator's backoffs scaled down."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.local import LocalConfig, LocalPlatform

# Emulator-only: Pub/Sub's 10 s minimum retry backoff becomes 0.1 s, so five deliveries take about a
# second instead of minutes (the dead-letter test).
TIME_SCALE = 0.01


@pytest.fixture(scope="package")  # its modules name ON_THE_CLI_PLATFORM, so it is made once
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    directory: Path = tmp_path_factory.mktemp("cli-platform")
    local = LocalPlatform(directory, LocalConfig(workers=1, port=0, emulator_port=0, emulator_time_scale=TIME_SCALE))
    local.up()
    try:
        yield local
    finally:
        local.down(drain_timeout_s=10)


@pytest.fixture
def cli_env(platform: LocalPlatform) -> dict[str, str]:
    """Environment that points the CLI at the test platform (through its state file)."""
    return {"GPURT_LOCAL_DIR": str(platform.directory), "GPURT_API_URL": "", "GPURT_CONTROL_TOKEN": "",
            "PUBSUB_EMULATOR_HOST": "", "GPURT_PROJECT": ""}
