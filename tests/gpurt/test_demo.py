"""``gpurt demo --quick`` end to end: platform up, jobs, report with plots, clean shutdown."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from gpurt.cli.app import app

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]


def _our_children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE}


def test_quick_demo_reports_and_shuts_down(tmp_path: Path) -> None:
    before = _our_children()
    env = {"GPURT_LOCAL_DIR": str(tmp_path / "local"), "GPURT_API_URL": "", "GPURT_CONTROL_TOKEN": "",
           "PUBSUB_EMULATOR_HOST": ""}

    result = CliRunner().invoke(app, ["demo", "--quick", "--workers", "1", "--no-validate",
                                      "--reports", str(tmp_path / "reports"), "--timeout", "180"], env=env)

    assert result.exit_code == 0, result.output
    assert "every job succeeded" in result.output
    (folder,) = (tmp_path / "reports").glob("demo-*")
    markdown = (folder / "report.md").read_text()
    for png in ("loss_distribution.png", "convergence.png", "platform_prometheus.png"):  # the last from Prometheus
        assert (folder / png).stat().st_size > 5_000 and f"]({png})" in markdown
    assert "deploy-probe" in markdown and "VaR" in markdown and "Black-Scholes" in markdown
    assert not (tmp_path / "local" / "state.json").exists()
    assert _our_children() <= before  # emulator, scheduler and Dask workers are gone
