"""``gpurt local up --monitoring``: the processes belong to the platform, scrape all of it, and go with ``down``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from runtime.access.prometheus_api import PrometheusApi
from runtime.local import LocalConfig, LocalPlatform, processes
from runtime.local.prometheus import config, stack
from runtime.protocol import contract
from tests.runtime.local.prometheus.polling import poll

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    local = LocalPlatform(tmp_path_factory.mktemp("monitored"), LocalConfig(
        port=0, emulator_port=0, workers=1, monitoring=True, alert_time_scale=0.5))
    local.up()
    yield local
    state = local.state
    local.down(drain_timeout_s=0, grace_s=3)
    assert state is not None and not any(processes.is_alive(p) for p in state.processes)


def _cli(platform: LocalPlatform, *args: str) -> object:
    from gpurt.cli.app import app

    return CliRunner().invoke(app, list(args), env={"GPURT_LOCAL_DIR": str(platform.directory), "COLUMNS": "200"})


def test_processes_are_recorded_with_their_data_under_the_platform(platform: LocalPlatform) -> None:
    state = platform.running_state()
    names = [p.name for p in state.processes]
    assert set(stack.PROCESS_NAMES) <= set(names)
    info = state.monitoring
    assert info is not None and info.alert_time_scale == 0.5
    assert info.directory == platform.directory / "monitoring"
    assert (info.directory / "prometheus").is_dir() and (info.directory / config.RULES_FILE).is_file()


def test_every_part_of_the_platform_is_scraped(platform: LocalPlatform) -> None:
    info = platform.running_state().monitoring
    assert info is not None

    def all_up() -> dict[str, str] | None:
        with PrometheusApi(info.prometheus_url) as api:
            targets = {t.job: t.health for t in api.targets()}
        return targets if targets and set(targets.values()) == {"up"} else None

    targets = poll(all_up, 30, "every scrape target up")
    assert set(targets) == {contract.SCHEDULER_DEPLOYMENT, config.DASK_JOB, config.EMULATOR_JOB}
    with PrometheusApi(info.prometheus_url) as api:  # the Dask scheduler's own series, through its dashboard
        assert poll(lambda: api.query("dask_scheduler_workers"), 10, "Dask's scheduler metrics")


def test_status_and_alerts_list_show_monitoring(platform: LocalPlatform) -> None:
    status = _cli(platform, "local", "status", "--json")
    assert status.exit_code == 0, status.output
    monitoring = json.loads(status.stdout)["monitoring"]
    assert monitoring["prometheus_url"].startswith("http://127.0.0.1:") and monitoring["alert_time_scale"] == 0.5

    listed = _cli(platform, "alerts", "list", "--json")
    assert listed.exit_code == 0, listed.output
    body = json.loads(listed.stdout)
    assert body["prometheus_url"] == monitoring["prometheus_url"] and body["notifications"] == []


def test_alerts_list_with_no_platform_running_says_so(tmp_path) -> None:
    from gpurt.cli.app import app

    result = CliRunner().invoke(app, ["alerts", "list", "--local-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "not running" in result.output


def test_a_monitoring_stack_that_fails_to_start_is_removed_and_the_platform_keeps_running(
        platform: LocalPlatform, monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime.local.platform import LocalPlatformError

    broken = {"groups": [{"name": "broken", "rules": [{"alert": "Broken", "expr": "sum(("}]}]}
    monkeypatch.setattr(stack.config, "build_rules", lambda scale: broken)

    with pytest.raises(LocalPlatformError, match="monitoring did not become ready: the prometheus process exited"):
        platform.start_monitoring(0.5)

    state = platform.running_state()  # everything else still runs
    assert state.monitoring is None and not set(stack.PROCESS_NAMES) & {p.name for p in state.processes}
    monkeypatch.undo()
    assert platform.start_monitoring(0.5).monitoring is not None  # and monitoring can start again
