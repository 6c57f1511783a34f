"""``gpurt bench emulator`` at a tiny size: both brokers measured, figures as JSON (rates are not asserted:
they are measurements, not behaviour)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from runtime.local.broker.official import find_official_emulator


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_bench_emulator_measures_both_brokers_as_json() -> None:
    from gpurt.cli.app import app

    if find_official_emulator() is None:
        pytest.skip("gcloud is not installed, so the official Pub/Sub emulator is not available")
    result = CliRunner().invoke(app, ["bench", "emulator", "--messages", "200", "--json"])

    assert result.exit_code == 0, result.output
    runs = json.loads(result.stdout[result.stdout.index("["):])
    assert [(run["broker"], run["durable"], run["messages"]) for run in runs] == [
        ("builtin", False, 200), ("builtin", True, 200), ("official", False, 200)]
    assert all(run["publish_per_s"] > 0 and run["end_to_end_per_s"] > 0 for run in runs)
