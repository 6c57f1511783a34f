"""State tools: backup, restore (Pulumi Cloud version, DIY checkpoints on file://, s3:// and gs://), repair."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.validation.recording_pulumi_cli import FIXTURES, STACK
from validation.adapters.pulumi_stack import AutomationStack
from validation.state import checkpoints, tools
from validation.state.backups import backup_stack, read_backup

pytestmark = pytest.mark.timeout(120)
DIY = FIXTURES / "diy-backend"


@pytest.fixture
def stack(pulumi_cli, tmp_path) -> AutomationStack:
    program = tmp_path / "program"
    program.mkdir()
    (program / "Pulumi.yaml").write_text("name: gpu-runtime\nruntime: python\n")
    return AutomationStack.select("staging", program)


def test_backup_is_a_private_timestamped_export(stack, tmp_path) -> None:
    path = backup_stack(stack, tmp_path / "backups")

    assert path.name.startswith("staging-") and path.name.endswith("Z.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_backup(path) == json.loads((FIXTURES / "stack_export_current.json").read_text())


def test_repair_backs_up_clears_pending_operations_and_refreshes(stack, pulumi_cli, tmp_path) -> None:
    change = tools.repair(stack, tmp_path / "backups")

    assert change.cleared == [
        "creating urn:pulumi:staging::gpu-runtime::gpu-runtime:pubsub:JobQueues$gcp:pubsub/subscription:"
        "Subscription::queues-gpu-job-request-dlq-sub",
        "updating urn:pulumi:staging::gpu-runtime::gpu-runtime:gke:GpuCluster$gcp:container/nodePool:NodePool::"
        "gke-t4-spot",
    ]
    assert read_backup(change.backup)["deployment"]["pending_operations"]  # backup taken before the write
    imported = pulumi_cli.current_state()
    assert imported["deployment"]["pending_operations"] == []
    assert imported["deployment"]["resources"] == read_backup(change.backup)["deployment"]["resources"]
    commands = pulumi_cli.commands()
    assert commands.index("stack import") < commands.index("refresh --skip-preview")
    assert change.refresh_result == "succeeded"


def test_repair_without_pending_operations_writes_nothing(stack, pulumi_cli, tmp_path) -> None:
    tools.repair(stack, tmp_path / "backups")
    before = len(pulumi_cli.calls())

    change = tools.repair(stack, tmp_path / "backups2")

    assert change.backup is None and change.cleared == []
    assert "stack import" not in pulumi_cli.commands()[before:]


def test_restore_of_a_pulumi_cloud_version(stack, pulumi_cli, tmp_path) -> None:
    change = tools.restore(stack, stack.export(5), "version 5", tmp_path / "backups")

    assert pulumi_cli.current_state() == json.loads((FIXTURES / "stack_export_v5.json").read_text())
    assert read_backup(change.backup)["deployment"]["pending_operations"]
    assert any(c["argv"][:4] == ["stack", "export", "--version", "5"] for c in pulumi_cli.calls())


def test_diy_checkpoints_are_listed_oldest_first_and_rewrapped() -> None:
    refs = checkpoints.list_checkpoints(DIY.as_uri(), "gpu-runtime", "staging")

    assert [r.version for r in refs] == [1, 2, 3]
    assert refs[1].url.endswith("staging-1763653953118000000.checkpoint.json")
    deployment = checkpoints.rewrap(checkpoints.read_checkpoint(refs[1].url))
    assert deployment["version"] == checkpoints.DEPLOYMENT_SCHEMA_VERSION
    assert deployment["deployment"]["manifest"]["time"] == "2026-11-19T00:00:00Z"
    assert "pending_operations" not in deployment["deployment"]


def test_a_destroyed_stack_checkpoint_is_refused() -> None:
    with pytest.raises(checkpoints.CheckpointError, match="holds no deployment"):
        checkpoints.rewrap(json.loads((FIXTURES / "checkpoint_destroyed.json").read_text()))


def test_missing_history_names_the_url() -> None:
    with pytest.raises(checkpoints.CheckpointError, match=r"no history at .*/\.pulumi/history/gpu-runtime/prod"):
        checkpoints.list_checkpoints(DIY.as_uri(), "gpu-runtime", "prod")


@pytest.fixture
def s3_backend() -> Iterator[tuple[str, dict]]:
    """The DIY backend fixture uploaded to a bucket of moto's S3 server on a free port."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    credentials = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}
    s3 = boto3.client("s3", endpoint_url=endpoint, **credentials)
    s3.create_bucket(Bucket="gpurt-state")
    for path in DIY.rglob("*.json"):
        s3.upload_file(str(path), "gpurt-state", f"pulumi/{path.relative_to(DIY).as_posix()}")
    options = {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint,
                                                                        "region_name": "us-east-1"}}
    yield "s3://gpurt-state/pulumi", options
    server.stop()


@pytest.mark.integration
def test_diy_checkpoints_on_s3_through_fsspec(s3_backend) -> None:
    url, options = s3_backend

    refs = checkpoints.list_checkpoints(url, "gpu-runtime", "staging", **options)

    assert [r.version for r in refs] == [1, 2, 3]
    assert refs[2].url == "s3://gpurt-state/pulumi/.pulumi/history/gpu-runtime/staging/" \
                          "staging-1763748471402155000.checkpoint.json"
    latest = checkpoints.rewrap(checkpoints.read_checkpoint(refs[2].url, **options))["deployment"]
    assert len(latest["pending_operations"]) == 2


@pytest.fixture
def gs_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The DIY backend fixture uploaded to a bucket of a GCS API emulator (fake-gcs-server) on a free port."""
    from gcsfs.core import GCSFileSystem

    from runtime.storage.filesystems import GCS_EMULATOR_ENV
    from tests.runtime.storage.gcs_server import fake_gcs_server

    with fake_gcs_server() as endpoint:
        monkeypatch.setenv(GCS_EMULATOR_ENV, endpoint)
        gcs = GCSFileSystem()
        gcs.mkdir("gpurt-state")
        for path in DIY.rglob("*.json"):
            gcs.pipe_file(f"gpurt-state/pulumi/{path.relative_to(DIY).as_posix()}", path.read_bytes())
        yield "gs://gpurt-state/pulumi"


@pytest.mark.integration
def test_diy_checkpoints_on_gcs_through_gcsfs(gs_backend: str) -> None:
    refs = checkpoints.list_checkpoints(gs_backend, "gpu-runtime", "staging")

    assert [r.version for r in refs] == [1, 2, 3]
    assert refs[2].url == "gs://gpurt-state/pulumi/.pulumi/history/gpu-runtime/staging/" \
                          "staging-1763748471402155000.checkpoint.json"
    latest = checkpoints.rewrap(checkpoints.read_checkpoint(refs[2].url))["deployment"]
    assert len(latest["pending_operations"]) == 2
    with pytest.raises(checkpoints.CheckpointError, match=r"no history at gs://gpurt-state/pulumi/.*/prod"):
        checkpoints.list_checkpoints(gs_backend, "gpu-runtime", "prod")


@pytest.mark.integration
def test_cli_restore_from_a_gcs_backend_checkpoint(gs_backend: str, stack, pulumi_cli, tmp_path) -> None:
    from gpurt.cli.app import app

    result = CliRunner().invoke(app, [
        "state", "restore", "--stack", STACK, "--backend-url", gs_backend, "--version", "2", "--yes",
        "--no-refresh", "--work-dir", str(tmp_path / "program"), "--backup-dir", str(tmp_path / "backups")],
        env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    assert pulumi_cli.current_state()["deployment"]["manifest"]["time"] == "2026-11-19T00:00:00Z"


def test_cli_restore_from_a_file_backend_checkpoint(stack, pulumi_cli, tmp_path) -> None:
    from gpurt.cli.app import app

    program = tmp_path / "program"
    result = CliRunner().invoke(app, [
        "state", "restore", "--stack", STACK, "--backend-url", DIY.as_uri(), "--version", "2", "--yes",
        "--no-refresh", "--work-dir", str(program), "--backup-dir", str(tmp_path / "backups")],
        env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    assert pulumi_cli.current_state()["deployment"]["manifest"]["time"] == "2026-11-19T00:00:00Z"
    assert len(list((tmp_path / "backups").iterdir())) == 1
    assert "refresh" not in " ".join(pulumi_cli.commands())


def test_cli_restore_needs_exactly_one_source(stack, tmp_path) -> None:
    from gpurt.cli.app import app

    program = str(tmp_path / "program")
    result = CliRunner().invoke(app, ["state", "restore", "--stack", STACK, "--work-dir", program],
                                env={"COLUMNS": "200"})

    assert result.exit_code == 2 and "choose one source" in result.output


def test_cli_backup_prints_the_path(stack, tmp_path) -> None:
    from gpurt.cli.app import app

    result = CliRunner().invoke(app, ["state", "backup", "--stack", STACK, "--work-dir", str(tmp_path / "program"),
                                      "--backup-dir", str(tmp_path / "b")], env={"COLUMNS": "300"})

    assert result.exit_code == 0, result.output
    written = next((tmp_path / "b").iterdir())
    assert str(written) in result.output.replace("\n", "")
    assert Path(written).exists()


def test_restore_says_it_is_not_a_rollback() -> None:
    from gpurt.cli.app import app

    shown = CliRunner().invoke(app, ["state", "restore", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    assert "not the cloud" in shown.output and "gpurt rollback" in shown.output and "409" in shown.output
