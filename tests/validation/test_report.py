"""Runner outcomes and the three report renderings (table, JSON, JUnit XML), parsed back."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from rich.console import Console

from gpurt.cli.render import print_validation
from validation.report import Status, Verdict
from validation.runner import Check, CheckFailed, CheckSkipped, NoCapacity, run_checks


def _fails() -> str:
    raise CheckFailed("ack deadline is 30", "set it to 600")


def _skips() -> str:
    raise CheckSkipped("cloud only")


def _crashes() -> str:
    raise ConnectionError("refused")


def _report():
    return run_checks("local", [Check("a.pass", lambda: "fine"), Check("b.fail", _fails), Check("c.skip", _skips),
                                Check("d.crash", _crashes)])


def test_runner_maps_outcomes_and_keeps_going_after_a_crash() -> None:
    report = _report()

    assert [r.status for r in report.results] == [Status.PASS, Status.FAIL, Status.SKIP, Status.FAIL]
    assert report.result("b.fail").fix == "set it to 600"
    assert report.result("d.crash").evidence == "ConnectionError: refused"
    assert not report.ok and [r.name for r in report.failed] == ["b.fail", "d.crash"]


def test_skips_alone_do_not_fail_a_report() -> None:
    assert run_checks("local", [Check("x", _skips)]).ok


def test_json_round_trips() -> None:
    parsed = json.loads(_report().to_json())

    assert parsed["ok"] is False and parsed["target"] == "local"
    assert [(r["name"], r["status"]) for r in parsed["results"]] == [
        ("a.pass", "pass"), ("b.fail", "fail"), ("c.skip", "skip"), ("d.crash", "fail")]


def test_junit_marks_failures_and_skips() -> None:
    root = ET.fromstring(_report().to_junit())
    suite = root.find("testsuite")

    assert suite.get("tests") == "4" and suite.get("failures") == "2" and suite.get("skipped") == "1"
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert cases["b.fail"].find("failure").get("message") == "ack deadline is 30"
    assert "fix: set it to 600" in cases["b.fail"].find("failure").text
    assert cases["c.skip"].find("skipped") is not None
    assert cases["a.pass"].find("failure") is None


def test_table_names_each_failure_and_its_fix() -> None:
    console = Console(record=True, width=200)
    print_validation(_report(), console)
    text = console.export_text()

    assert "✗ b.fail: set it to 600" in text
    assert "2 check(s) failed" in text


def _short() -> str:
    raise NoCapacity("below the stack's need: GPUS_ALL_REGIONS (global) need 4 GPUs, limit 0",
                     "request it: `gcloud quotas preferences create ...`")


def test_a_quota_short_of_the_need_is_no_capacity_not_broken() -> None:
    """issue #42: "no capacity" is a verdict of its own, which the deploy workflow does not roll back."""
    short = run_checks("stack staging", [Check("a.pass", lambda: "fine"), Check("quota.capacity", _short)])
    broken = run_checks("stack staging", [Check("quota.capacity", _short), Check("b.fail", _fails)])

    assert short.result("quota.capacity").status is Status.NO_CAPACITY and not short.failed
    assert short.verdict is Verdict.NO_CAPACITY and not short.ok
    assert broken.verdict is Verdict.BROKEN  # one broken check outweighs any shortage
    assert json.loads(short.to_json())["verdict"] == "no-capacity"
    failure = ET.fromstring(short.to_junit()).find("testsuite/testcase[@name='quota.capacity']/failure")
    assert failure is not None and failure.get("type") == "no-capacity"
    console = Console(record=True, width=200)
    print_validation(short, console)
    text = " ".join(console.export_text().split())
    assert "! quota.capacity (no capacity, not broken): request it" in text
    assert "nothing to roll back" in text


def test_validate_exits_4_on_no_capacity_and_1_when_broken(monkeypatch) -> None:
    from typer.testing import CliRunner

    import validation.build
    import validation.targets
    from gpurt.cli.app import app

    checks = {"short": [Check("quota.capacity", _short)], "broken": [Check("quota.capacity", _short),
                                                                      Check("b.fail", _fails)]}
    monkeypatch.setattr(validation.build, "local_target", lambda _platform, _is_alive: None)
    for verdict, code in (("short", 4), ("broken", 1)):
        monkeypatch.setattr(validation.targets, "local_checks", lambda _target, v=verdict: checks[v])
        result = CliRunner().invoke(app, ["validate", "--local"], env={"COLUMNS": "200"})
        assert result.exit_code == code, result.output
