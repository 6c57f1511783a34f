"""A maintenance drain on two local scheduler replicas (real processes on a shared lease file): asked of one,
followed by every replica, kept across a rolling restart, undone by `gpurt maintenance normal`."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from runtime.access.control_api import ApiClient, ApiError
from runtime.access.local_state import LOCAL_DIR_ENV
from runtime.local import processes
from runtime.local.platform import SCHEDULER, LocalPlatform
from tests.runtime.local.two_replicas import ON_TWO_REPLICAS

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240), ON_TWO_REPLICAS]
RESUME_WAIT_S = 30.0  # the other replica follows within the follow period (2 s); generous on a loaded machine


def _gpurt(platform: LocalPlatform, *args: str) -> object:
    from gpurt.cli.app import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200", LOCAL_DIR_ENV: str(platform.directory)})


def _replica_statuses(platform: LocalPlatform) -> dict[str, dict]:
    """Each live replica's own ``GET /status``, asked on its own port (None while it does not answer)."""
    state = platform.running_state()
    statuses = {}
    for record in state.schedulers():
        with ApiClient(record.api_url or "", state.control_token, timeout_s=5.0) as api:
            try:
                statuses[record.name] = api.status()
            except ApiError:
                statuses[record.name] = None
    return statuses


def test_a_drain_through_one_replica_drains_every_replica_and_survives_their_rolling_restart(
        platform: LocalPlatform) -> None:
    """`gpurt maintenance drain` reaches one replica (the platform's API URL, as the Service picks one pod); every
    replica stops intake, the command waits for all of them, and replicas restarted one by one come up drained
    until `gpurt maintenance normal`."""
    def all_in(mode: str, consuming: bool) -> bool:
        found = _replica_statuses(platform).values()
        return all(s is not None and s["mode"] == mode and s["consuming"] is consuming for s in found)

    try:
        drained = _gpurt(platform, "maintenance", "drain", "--wait", "--timeout", "60")
        assert drained.exit_code == 0, drained.output
        statuses = _replica_statuses(platform)
        assert len(statuses) == 2
        assert all(s["mode"] == "drain" and not s["consuming"] for s in statuses.values()), statuses
        reports = statuses[SCHEDULER]["replicas"]  # every replica's own report, through either one
        assert len(reports) == 2 and all(r == {**r, "mode": "drain", "in_flight": 0} for r in reports.values())

        shown = _gpurt(platform, "maintenance", "status", "--json")
        assert shown.exit_code == 0, shown.output
        assert [r["mode"] for r in json.loads(shown.stdout)["replicas"].values()] == ["drain", "drain"]

        restarted = _gpurt(platform, "local", "restart-scheduler", "--json")
        assert restarted.exit_code == 0, restarted.output
        assert all_in("drain", consuming=False), _replica_statuses(platform)  # ready, and drained from the start
    finally:
        resumed = _gpurt(platform, "maintenance", "normal")
    assert resumed.exit_code == 0, resumed.output
    # The replica that answered resumes at once, the other within the follow period.
    assert processes.wait_until(lambda: all_in("normal", consuming=True), RESUME_WAIT_S, interval_s=0.25), (
        _replica_statuses(platform))


