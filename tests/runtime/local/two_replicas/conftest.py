"""One local platform of two scheduler replicas, each with one Dask worker, for every test of the package.

Each test leaves it whole (every replica ready and consuming, the broker up), as it found it: what one kills or
drains it brings back before it ends.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runtime.local.platform import LocalConfig, LocalPlatform
from tests.runtime.local.two_replicas import STOP_GRACE_S


@pytest.fixture(scope="package")  # its modules name ON_TWO_REPLICAS, so it is made once
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    local = LocalPlatform(tmp_path_factory.mktemp("two-replicas"),
                          LocalConfig(port=0, emulator_port=0, workers=1, replicas=2))
    local.up()
    yield local
    local.down(drain_timeout_s=0, grace_s=STOP_GRACE_S)
