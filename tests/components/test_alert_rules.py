"""The alert rules: promtool accepts them, promtool's unit tests fire and stay silent where they should,
and every rule is traceable (seed alerts all present, metric names from the contract, runbook per rule)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from runtime.manifests import alerts
from runtime.protocol import contract

PROMTOOL = shutil.which("promtool")
FIXTURES = Path(__file__).parent / "promtool"
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (make system-deps)")

# The runbook each alert links to (docs/runbooks/<name>.md).
SEED_RUNBOOKS = {
    "gpu-node-down", "gpu-ecc-errors", "dask-workers-down", "low-gpu-utilization", "high-job-failure-rate",
    "high-gpu-temperature", "queue-backlog", "pool-evictions", "gpu-memory-pressure", "leader-election",
    "reclaimer-errors", "dlq-growth", "elevated-retries",
    "vertex-overflow",  # not a seed alert: Vertex AI overflow (docs/scheduler.md)
}  # fmt: skip


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


@needs_promtool
@pytest.mark.timeout(60)
def test_rendered_rules_pass_promtool_check(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yml"
    alerts.render_rules_yaml(rules)
    result = _promtool("check", "rules", str(rules), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerts.ALL_RULES)} rules found" in result.stdout


@needs_promtool
@pytest.mark.timeout(60)
def test_promtool_unit_tests_fire_and_stay_silent_as_specified(tmp_path: Path) -> None:
    alerts.render_rules_yaml(tmp_path / "rules.yml")
    shutil.copy(FIXTURES / "alerts_test.yml", tmp_path)
    result = _promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
@pytest.mark.timeout(60)
def test_promtool_unit_tests_notice_a_wrong_threshold(tmp_path: Path) -> None:
    text = alerts.render_rules_yaml().replace(f"max({contract.METRICS.backlog_messages}) > 100", "max(x) > 100")
    (tmp_path / "rules.yml").write_text(text)
    shutil.copy(FIXTURES / "alerts_test.yml", tmp_path)
    result = _promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert result.returncode != 0
    assert "JobQueueBacklog" in result.stdout + result.stderr


@needs_promtool
@pytest.mark.timeout(60)
def test_promtool_unit_tests_notice_a_queue_wait_slo_looser_than_five_minutes(tmp_path: Path) -> None:
    """issue #45: the queue-wait alert fires at the runbook's SLO (p95 under 5 minutes), per queue."""
    rendered = alerts.render_rules_yaml()
    assert f"> {alerts.QUEUE_WAIT_SLO_S}" in rendered and alerts.QUEUE_WAIT_SLO_S == 300
    (tmp_path / "rules.yml").write_text(rendered.replace(f"> {alerts.QUEUE_WAIT_SLO_S}", "> 600"))
    shutil.copy(FIXTURES / "alerts_test.yml", tmp_path)
    result = _promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert result.returncode != 0
    assert "QueueWaitSLOBreached" in result.stdout + result.stderr


def test_the_queue_wait_alert_is_per_queue() -> None:
    rule = next(rule for rule in alerts.ALL_RULES if rule.alert == "QueueWaitSLOBreached")
    assert "sum by (queue, le)" in rule.expr and (rule.for_, rule.runbook) == ("10m", "queue-backlog")


def test_every_seed_alert_has_a_rule_and_every_rule_a_known_runbook() -> None:
    assert {rule.runbook for rule in alerts.ALL_RULES} == SEED_RUNBOOKS
    names = [rule.alert for rule in alerts.ALL_RULES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize(
    ("priority", "severity"),
    [(alerts.Priority.P0, "critical"), (alerts.Priority.P1, "warning"), (alerts.Priority.P2, "info")],
)
def test_priority_maps_to_severity_label(priority: alerts.Priority, severity: str) -> None:
    rule = next(rule for rule in alerts.ALL_RULES if rule.priority is priority)
    rendered = rule.to_rule()
    assert rendered["labels"] == {"severity": severity, "priority": priority.name}


def test_seed_priorities_are_kept() -> None:
    by_name = {rule.alert: rule.priority for rule in alerts.ALL_RULES}
    assert by_name["GpuNodeDown"] is by_name["GpuEccErrors"] is by_name["DaskWorkersAllDown"] is alerts.Priority.P0
    assert by_name["GpuUtilizationLow"] is by_name["JobFailureRateHigh"] is alerts.Priority.P1
    assert by_name["GpuTemperatureHigh"] is by_name["JobQueueBacklog"] is alerts.Priority.P2


def test_platform_series_in_rules_are_contract_metrics() -> None:
    known = set(vars(contract.METRICS).values())
    for rule in alerts.ALL_RULES:
        # (a histogram's series are its name with _bucket, as the dashboard test reads them)
        used = {re.sub(r"_bucket$", "", name) for name in re.findall(rf"\b{contract.METRICS_PREFIX}[a-z_]+", rule.expr)}
        assert used <= known, f"{rule.alert} queries unknown series {used - known}"


def test_runbook_base_prefixes_every_link() -> None:
    groups = yaml.safe_load(alerts.render_rules_yaml(runbook_base="https://docs.example/runbooks/"))["groups"]
    urls = [rule["annotations"]["runbook_url"] for group in groups for rule in group["rules"]]
    assert urls and all(re.fullmatch(r"https://docs\.example/runbooks/[a-z-]+\.md", url) for url in urls)


def test_cluster_rules_object_carries_all_groups_cluster_wide() -> None:
    rule = alerts.build_cluster_rules()
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.googleapis.com/v1", "ClusterRules")
    assert "namespace" not in rule["metadata"]
    assert rule["spec"]["groups"] == alerts.build_rule_groups()
