"""``gpurt validate --local`` against the real local platform: all green, then broken three ways.

One platform (emulator + scheduler processes on free ports) serves the whole module; each test breaks one
thing and checks that exactly the checks that depend on it fail, with a message naming the fix. The
scheduler is stopped last, since that one is not repaired.
"""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runtime.local import processes
from runtime.protocol import contract
from validation.build import local_target
from validation.report import Report, Status
from validation.runner import run_checks
from validation.targets import local_checks

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]
# A stopped scheduler never answers; the test need not wait the full 30 s of the contract to see that.
SHORT_PROBE_S = 3.0
STOP_GRACE_S = 3.0  # the platform is thrown away: no need to wait for a graceful Dask shutdown


@pytest.fixture(scope="module")
def platform(tmp_path_factory) -> Iterator[object]:
    from runtime.local.platform import LocalConfig, LocalPlatform

    local = LocalPlatform(tmp_path_factory.mktemp("local"), LocalConfig(port=0, emulator_port=0, workers=1))
    local.up()
    yield local
    local.down(drain_timeout_s=0, grace_s=STOP_GRACE_S)


def _validate(platform) -> Report:
    target = dataclasses.replace(local_target(platform, processes.is_alive), probe_timeout_s=SHORT_PROBE_S)
    return run_checks("local", local_checks(target))


def _failed(report: Report) -> set[str]:
    return {r.name for r in report.failed}


def test_cli_reports_all_green_as_json_and_junit(platform, tmp_path: Path) -> None:
    from gpurt.cli.app import app

    junit = tmp_path / "validate.xml"
    result = CliRunner().invoke(app, ["validate", "--local", "--local-dir", str(platform.directory), "--json",
                                      "--junit", str(junit)])

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{"):])
    statuses = {r["name"]: r["status"] for r in report["results"]}
    assert report["ok"] is True and "fail" not in statuses.values()
    assert statuses["probe.round-trip"] == statuses["scheduler.healthz"] == statuses["pubsub.dlq-empty"] == "pass"
    assert statuses["iam.service-account-roles"] == "skip"
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("failures") == "0" and int(suite.get("tests")) == len(report["results"])


def test_changed_ack_deadline_fails_only_subscription_settings(platform) -> None:
    pubsub = local_target(platform, processes.is_alive).pubsub
    path = f"projects/{pubsub.project}/subscriptions/{contract.REQUEST_SUBSCRIPTION}"

    def set_ack(seconds: int) -> None:
        pubsub._subscriber.update_subscription(request={
            "subscription": {"name": path, "ack_deadline_seconds": seconds},
            "update_mask": {"paths": ["ack_deadline_seconds"]}})

    set_ack(60)
    try:
        report = _validate(platform)
    finally:
        set_ack(contract.ACK_DEADLINE_S)

    assert _failed(report) == {"pubsub.subscription-settings"}
    result = report.result("pubsub.subscription-settings")
    assert result.evidence == f"{contract.REQUEST_SUBSCRIPTION}: ack deadline (s) is 60, expected 600"
    assert "runtime/protocol/contract.py" in result.fix


def test_deleted_dlq_subscription_fails_only_its_existence_check(platform) -> None:
    from runtime.pubsub.admin import ensure_topology

    pubsub = local_target(platform, processes.is_alive).pubsub
    pubsub.delete_subscription(contract.REQUEST_DLQ_SUBSCRIPTION)
    try:
        report = _validate(platform)
    finally:
        ensure_topology(pubsub.project, pubsub._publisher, pubsub._subscriber)

    assert _failed(report) == {"pubsub.dlq-subscriptions"}
    assert report.result("pubsub.dlq-subscriptions").evidence == f"{contract.REQUEST_DLQ_SUBSCRIPTION} is missing"
    assert report.result("pubsub.dlq-empty").status is Status.SKIP


def test_stopped_scheduler_fails_the_checks_that_need_it(platform) -> None:
    from runtime.local import processes
    from runtime.local.platform import SCHEDULER

    record = platform.state.process(SCHEDULER)
    processes.stop_process(record, grace_s=STOP_GRACE_S)

    report = _validate(platform)

    assert _failed(report) == {"scheduler.process-running", "scheduler.healthz", "probe.round-trip",
                               "dask.gpu-workers"}
    assert report.result("scheduler.process-running").evidence.startswith(f"scheduler (pid {record.pid}) is not")
    assert report.result("scheduler.process-running").fix == "start the local platform again with `gpurt local up`"
    assert "unreachable" in report.result("scheduler.healthz").evidence
    assert report.result("pubsub.subscription-settings").status is Status.PASS
