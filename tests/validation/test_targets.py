"""Check lists per target, the stack settings they are built from, and CLI argument errors."""

from __future__ import annotations

from unittest import mock

from typer.testing import CliRunner

from validation.adapters.pulumi_stack import AutomationStack
from validation.build import stack_settings
from validation.targets import CloudTarget, LocalTarget, cloud_checks, local_checks


def test_local_and_cloud_run_the_same_checks_in_the_same_order() -> None:
    local = local_checks(LocalTarget(pubsub=mock.Mock(), api_url="http://x", dask=mock.Mock(),
                                     processes_alive=lambda: (True, "")))
    cloud = cloud_checks(CloudTarget(project="p", region="r", pubsub=mock.Mock(), iam=mock.Mock(),
                                     kube=mock.Mock(), dask=mock.Mock(), vertex=mock.Mock()))

    names = [c.name for c in cloud]
    assert [c.name.replace("process-running", "pods-running") for c in local] == names
    assert len(set(names)) == len(names) == 14


def test_stack_settings_come_from_the_last_update(pulumi_cli, tmp_path) -> None:
    program = tmp_path / "program"
    program.mkdir()
    (program / "Pulumi.yaml").write_text("name: gpu-runtime\nruntime: python\n")

    settings = stack_settings(AutomationStack.select("staging", program))

    pool_bounds, needs = settings.pop("pool_bounds"), settings.pop("quota_needs")
    assert settings == {"project": "impulse-gpu-runtime-staging", "region": "us-central1", "scales_from_zero": True,
                        "routes_to_vertex": False}
    # Every quota the deployed node pools (the stack's state) reach; no Vertex AI one: nothing is routed there.
    assert {(n.metric, n.scope, n.amount) for n in needs} == {
        ("CPUS", "us-central1", 40), ("SSD_TOTAL_GB", "us-central1", 500),
        ("PREEMPTIBLE_NVIDIA_T4_GPUS", "us-central1", 4), ("GPUS_ALL_REGIONS", "global", 4),
        ("CPUS_ALL_REGIONS", "global", 40)}
    assert [(b.pool, b.minimum, b.maximum, b.queued) for b in pool_bounds] == [("t4-spot", 0, 4, False)]


def test_validate_needs_exactly_one_target() -> None:
    from gpurt.cli.app import app

    neither = CliRunner().invoke(app, ["validate"], env={"COLUMNS": "200"})
    both = CliRunner().invoke(app, ["validate", "--local", "--stack", "s"], env={"COLUMNS": "200"})

    assert neither.exit_code == both.exit_code == 2
    assert "give exactly one of --local or --stack NAME" in neither.output


def test_validate_local_without_a_platform_says_how_to_start_one(tmp_path) -> None:
    from gpurt.cli.app import app

    result = CliRunner().invoke(app, ["validate", "--local", "--local-dir", str(tmp_path)], env={"COLUMNS": "300"})

    assert result.exit_code == 1
    # rich wraps at the terminal's width whatever COLUMNS says when the path is long: compare the words
    assert "start it with `gpurt local up`" in " ".join(result.output.split())


def test_leader_release_refuses_without_force() -> None:
    from gpurt.cli.app import app

    result = CliRunner().invoke(app, ["leader", "release"], env={"COLUMNS": "200"})

    assert result.exit_code == 2 and "refusing without --force" in result.output
