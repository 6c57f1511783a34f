"""The generated Prometheus and Alertmanager configuration, checked by the tools' own validators."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from runtime.local.prometheus import config, stack
from runtime.manifests import alerts
from runtime.protocol import contract
from tests.file_modes import modes_open_to_others

TARGETS = config.ScrapeTargets(schedulers=("127.0.0.1:8080", "127.0.0.1:8081"), dask=("127.0.0.1:8787",),
                               emulator=("127.0.0.1:9999",))


def _tool(name: str) -> str:
    found = shutil.which(name)
    assert found, f"{name} not installed; install with: {stack.INSTALL_COMMAND}"
    return found


def test_scrape_jobs_carry_the_cloud_job_names() -> None:
    doc = config.build_prometheus_config(TARGETS, "127.0.0.1:9093")
    jobs = {job["job_name"]: job["static_configs"][0]["targets"] for job in doc["scrape_configs"]}
    assert jobs == {contract.SCHEDULER_DEPLOYMENT: ["127.0.0.1:8080", "127.0.0.1:8081"],
                    f"{contract.DASK_CLUSTER_NAME}-scheduler": ["127.0.0.1:8787"],
                    config.EMULATOR_JOB: ["127.0.0.1:9999"]}
    assert doc["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["127.0.0.1:9093"]


def test_alertmanager_routes_each_severity_to_its_receiver() -> None:
    doc = config.build_alertmanager_config("http://127.0.0.1:7777/")
    routes = {route["matchers"][0]: route["receiver"] for route in doc["route"]["routes"]}
    assert routes == {f'severity="{p.severity}"': p.severity for p in alerts.Priority}
    urls = {r["name"]: r["webhook_configs"][0]["url"] for r in doc["receivers"]}
    assert urls == {p.severity: f"http://127.0.0.1:7777/alerts/{p.severity}" for p in alerts.Priority}
    assert all(r["webhook_configs"][0]["send_resolved"] for r in doc["receivers"])


@pytest.mark.usefixtures("open_umask")
def test_the_configuration_is_private_to_its_user(tmp_path: Path) -> None:
    monitoring = tmp_path / "local" / "monitoring"
    config.write_yaml(config.build_prometheus_config(TARGETS, "127.0.0.1:9093"), monitoring / config.PROMETHEUS_FILE)
    (monitoring / config.RULES_FILE).write_text("left readable by an earlier run\n")
    config.write_yaml(config.build_rules(0.05), monitoring / config.RULES_FILE)
    assert modes_open_to_others(tmp_path / "local") == {}


@pytest.mark.timeout(60)
def test_promtool_and_amtool_accept_the_files(tmp_path: Path) -> None:
    config.write_yaml(config.build_rules(0.05), tmp_path / config.RULES_FILE)
    config.write_yaml(config.build_prometheus_config(TARGETS, "127.0.0.1:9093"), tmp_path / config.PROMETHEUS_FILE)
    config.write_yaml(config.build_alertmanager_config("http://127.0.0.1:7777"), tmp_path / config.ALERTMANAGER_FILE)

    prom = subprocess.run([_tool("promtool"), "check", "config", config.PROMETHEUS_FILE], cwd=tmp_path,
                          capture_output=True, text=True, timeout=30, check=False)
    assert prom.returncode == 0, prom.stdout + prom.stderr
    assert f"SUCCESS: {len(alerts.ALL_RULES)} rules found" in prom.stdout
    am = subprocess.run([_tool("amtool"), "check-config", config.ALERTMANAGER_FILE], cwd=tmp_path,
                        capture_output=True, text=True, timeout=30, check=False)
    assert am.returncode == 0, am.stdout + am.stderr


def test_missing_binaries_name_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(stack.MonitoringUnavailable, match="apt-get install -y prometheus prometheus-alertmanager"):
        stack.find_binaries()
