"""One local platform for the client's integration tests and notebooks, and an environment that finds it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.access.local_state import LOCAL_DIR_ENV
from runtime.local import LocalConfig, LocalPlatform

# Variables that would point a client somewhere else than the test platform.
TARGET_VARIABLES = ("GPURT_API_URL", "GPURT_CONTROL_TOKEN", "PUBSUB_EMULATOR_HOST", "GPURT_PROJECT")


@pytest.fixture(scope="package")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    """A running local platform with one Dask worker (the machine is shared)."""
    directory: Path = tmp_path_factory.mktemp("client-platform")
    local = LocalPlatform(directory, LocalConfig(workers=1, port=0, emulator_port=0))
    local.up()
    try:
        yield local
    finally:
        local.down(drain_timeout_s=5)


@pytest.fixture
def platform_env(platform: LocalPlatform, monkeypatch: pytest.MonkeyPatch) -> LocalPlatform:
    """The environment a quant has after `gpurt local up`: only the local state says where the platform is."""
    for name in TARGET_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(LOCAL_DIR_ENV, str(platform.directory))
    return platform
