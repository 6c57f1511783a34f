"""``gpurt bench scaling`` end to end at a tiny scale: real worker processes, JSON out, goal verdicts."""

from __future__ import annotations

import json
import threading

import pytest
from typer.testing import CliRunner

from gpurt.bench.runtime.scaling import ScalingRow, ScalingRun
from gpurt.cli.app import app
from gpurt.cli.bench.scaling import markdown


def _span_pruners() -> set[int | None]:
    """The Dask backends' pruner threads alive in this process (``runtime.scheduler.backends.dask``)."""
    return {thread.ident for thread in threading.enumerate() if thread.name == "gpurt-dask-spans"}


@pytest.mark.slow  # a Dask cluster per worker count (free ports, no fixed one)
def test_scaling_json_gives_every_worker_count_and_the_same_estimates() -> None:
    pruners_before = _span_pruners()
    result = CliRunner().invoke(app, ["bench", "scaling", "--workers", "2", "--repeats", "1", "--scale", "0.0001",
                                      "--device", "cpu", "--json"])
    assert result.exit_code == 0, result.output
    # every backend it made is closed: none of their threads is left polling the closed clusters
    assert _span_pruners() <= pruners_before
    body = json.loads(result.stdout)
    assert set(body["efficiency"]) == {"european_option", "portfolio_var"}
    for job, by_workers in body["efficiency"].items():
        assert by_workers["1"] == 1.0 and by_workers["2"] > 0
        rows = [r for r in body["rows"] if r["job"] == job]
        assert [r["shards"] for r in rows] == [1, 2]
        # the sharded run reports what the unsharded one does
        assert rows[1]["estimate"] == pytest.approx(rows[0]["estimate"], rel=1e-12)


def test_a_gpu_run_without_gpus_is_refused_plainly(monkeypatch: pytest.MonkeyPatch) -> None:
    import runtime.scheduler.settings as settings

    monkeypatch.setattr(settings, "detect_gpus", lambda: 0)
    result = CliRunner().invoke(app, ["bench", "scaling", "--device", "gpu"])
    assert result.exit_code == 2 and "no GPU" in result.output and "Traceback" not in result.output


def test_the_section_says_whether_the_two_worker_goal_is_met() -> None:
    run = ScalingRun("cpu", [ScalingRow("european_option", 1, 4.0, 1.0, 1.0, 1, 10.45),
                             ScalingRow("european_option", 2, 2.5, 1.6, 0.8, 2, 10.45),
                             ScalingRow("portfolio_var", 1, 3.0, 1.0, 1.0, 1, 5e5),
                             ScalingRow("portfolio_var", 2, 1.6, 1.875, 0.9375, 2, 5e5)])
    text = markdown(run, "a test machine", "2026-11-23", "load average 1.0")
    assert "european_option: 80%, NOT met" in text and "portfolio_var: 94%, met" in text
    assert "a test machine, 2026-11-23" in text and "load average 1.0" in text
