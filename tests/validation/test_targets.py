"""Check lists per target, the stack settings they are built from, and CLI argument errors."""

from __future__ import annotations

import json
import os
from unittest import mock

from typer.testing import CliRunner

from runtime.protocol.queues import BUILT_IN_QUEUES
from tests.validation.recording_pulumi_cli import FIXTURES, STACK, RecordingPulumiCli
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

    dask, needs = settings.pop("dask"), settings.pop("quota_needs")
    # The queues the deployed config declares (this recorded update predates desk queues): the built-in ones.
    assert settings.pop("queues") == BUILT_IN_QUEUES
    assert settings == {"project": "impulse-gpu-runtime-staging", "region": "us-central1", "scales_from_zero": True,
                        "routes_to_vertex": False}
    # Every quota the deployed node pools (the stack's state) reach; no Vertex AI one: nothing is routed there.
    assert {(n.metric, n.scope, n.amount) for n in needs} == {
        ("CPUS", "us-central1", 40), ("SSD_TOTAL_GB", "us-central1", 500),
        ("PREEMPTIBLE_NVIDIA_T4_GPUS", "us-central1", 4), ("GPUS_ALL_REGIONS", "global", 4),
        ("CPUS_ALL_REGIONS", "global", 40)}
    # The Dask objects the deploy's builders render for that config: one pool, the autoscaler bounding it.
    assert (dask.pools, dask.autoscaler["spec"]["minimum"], dask.autoscaler["spec"]["maximum"]) == (["t4-spot"], 0, 4)


def test_validate_refuses_a_stored_config_only_the_stacks_cross_field_rules_refuse(tmp_path, monkeypatch) -> None:
    """The deploy's own ``parse_stack_config`` reads the stored config, so its stack-level rules apply too.

    8 workers on a pool of at most 2 nodes in each of 2 zones, one worker per node: each pool field is valid on
    its own (a pool read alone passes); only the stack's rule (daskWorkersMax within the pool's node capacity)
    refuses it, as ``pulumi up`` would.
    """
    from gpurt.cli.app import app

    history = json.loads((FIXTURES / "stack_history.json").read_text())
    history[0]["config"]["gpu-runtime:gpuPools"]["objectValue"][0]["daskWorkersMax"] = 8
    history[0]["config"]["gpu-runtime:gpuPools"]["value"] = json.dumps(
        history[0]["config"]["gpu-runtime:gpuPools"]["objectValue"])
    cli = RecordingPulumiCli(tmp_path / "pulumi-cli", history)
    monkeypatch.setenv("PATH", f"{cli.bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK", "1")
    program = tmp_path / "program"
    program.mkdir()
    (program / "Pulumi.yaml").write_text("name: gpu-runtime\nruntime: python\n")

    result = CliRunner().invoke(app, ["validate", "--stack", STACK, "--work-dir", str(program)],
                                env={"COLUMNS": "300"})

    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # one red line, no traceback
    words = " ".join(result.output.split())
    assert (f"invalid stack config in stack {STACK}'s update 7: gpu-runtime config: gpuPools[t4-spot]."
            "daskWorkersMax 8 exceeds the pool's node capacity 4") in words
    # Refused before any cluster is contacted: only the stack's history and outputs were read.
    assert {c["argv"][0] for c in cli.calls()} <= {"stack", "whoami", "version", "about"}


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
