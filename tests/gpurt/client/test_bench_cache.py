"""``gpurt bench cache``'s measurement: misses run, hits are answered from the cache (figures go to BENCHMARKS.md)."""

from __future__ import annotations

import pytest

from gpurt.bench.cache import measure
from runtime.local import LocalPlatform
from tests.gpurt.client import ON_THE_CLIENT_PLATFORM

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300), ON_THE_CLIENT_PLATFORM]


def test_every_hit_is_its_miss_bit_for_bit_and_no_dask_run_happens_during_the_hits(platform_env: LocalPlatform) -> None:
    seen: dict[str, int] = {}
    figures = measure(platform_env.target(), jobs=5, timeout_s=120,
                      progress=lambda phase, done: seen.__setitem__(phase, max(done, seen.get(phase, 0))))
    assert seen == {"miss": 5, "hit": 5}
    assert figures.identical and figures.runs_during_hits == 0  # the hits found the misses' results
    assert len(figures.miss_s) == len(figures.hit_s) == 5 and all(s > 0 for s in figures.hit_s)
