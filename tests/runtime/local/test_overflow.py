"""The local platform with Vertex AI overflow on: its custom-jobs stand-in runs as a process of the platform, and
a job that waits past the budget behind a full pool runs there (what ``make demo`` shows)."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from gpurt.demo.run import overflow_requests, run_overflow
from runtime.access.local_state import VERTEX_API
from runtime.local import LocalConfig, LocalPlatform
from validation.drills import loopback
from validation.drills.base import DrillContext

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]


def test_a_full_local_pool_overflows_to_the_stand_in_and_down_stops_it(tmp_path: Path) -> None:
    platform = LocalPlatform(tmp_path / "local", LocalConfig(workers=1, port=0, emulator_port=0, spill_after_s=2))
    state = platform.up().state
    try:
        stand_in = state.process(VERTEX_API)
        assert stand_in is not None
        requests = overflow_requests("local-overflow", workers=1, spill_after_s=2)
        results = run_overflow(platform, requests, workers=1, timeout_s=120)

        assert [results[r.job_id].status for r in requests] == ["succeeded", "succeeded"]
        holder, waiter = (results[r.job_id].metrics for r in requests)
        assert holder.backend == "dask" and holder.spilled_after_s is None
        assert waiter.backend == "vertex" and waiter.spilled_after_s is not None and waiter.spilled_after_s >= 2
        assert list((tmp_path / "local" / "logs" / "custom-jobs").glob("*.log"))  # the custom job's own log

        # The chaos drill's loopback rows on the platform as `make demo` runs it: the stand-in and the Dask
        # scheduler refuse a stranger.
        ctx = DrillContext(platform, timeout_s=30)
        loopback.run(ctx)
        assert ctx.evidence == ["loopback: 1 Dask port(s) refused a client without the cluster's credentials; "
                                "the Vertex AI stand-in refused a command (401 without the token, 400 with it)"]
    finally:
        platform.down()
    assert not psutil.pid_exists(stand_in.pid) or psutil.Process(stand_in.pid).status() == psutil.STATUS_ZOMBIE
