"""``gpurt bench client``'s measurement runs every path to its last result (figures go to BENCHMARKS.md, not here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpurt.bench.client import PATHS, measure
from runtime.access.local_state import LOCAL_DIR_ENV
from runtime.local import LocalPlatform
from tests.gpurt.client import ON_THE_CLIENT_PLATFORM
from tests.gpurt.client.conftest import TARGET_VARIABLES

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300), ON_THE_CLIENT_PLATFORM]


def test_each_path_gets_every_result_and_its_cpu_is_counted(platform: LocalPlatform, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # As `gpurt bench client` runs it: on a platform of its own, whose state is not where the environment points
    # (the client once dropped the platform's broker tokens there, and the local broker refused it).
    for name in TARGET_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(LOCAL_DIR_ENV, str(tmp_path))
    seen: dict[str, int] = {}
    runs = measure(platform.target(), jobs=10, timeout_s=120,
                   progress=lambda path, done: seen.__setitem__(path, max(done, seen.get(path, 0))))
    assert [run.path for run in runs] == list(PATHS)
    assert seen == dict.fromkeys(PATHS, 10)  # every path counted all of its own results, nobody else's
    assert all(run.jobs == 10 and run.wall_s > 0 and run.cpu_s > 0 for run in runs)
