"""Rollback: target choice from real-format stack history, then the redeploy through pulumi.automation."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from components.policy.bundle import write_bundle
from tests.validation.conftest import git
from tests.validation.fake_pulumi import history_entry
from tests.validation.recording_pulumi_cli import FIXTURES, ORG, REPO, STACK, RecordingPulumiCli
from validation.adapters.pulumi_stack import SECRET_MASK, AutomationStack
from validation.rollback.execute import execute
from validation.rollback.plan import ConfigChange, NothingToUndo, RollbackError, choose_target

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def history(pulumi_cli):
    repo = pulumi_cli.root.parent / "program-for-history"
    repo.mkdir()
    (repo / "Pulumi.yaml").write_text("name: gpu-runtime\nruntime: python\n")
    return AutomationStack.select("staging", repo).history()


def test_default_target_is_the_last_succeeded_update_before_the_current_one(history) -> None:
    plan = choose_target(history)

    assert (plan.current.version, plan.current.result) == (7, "failed")
    assert plan.target.version == 5  # 6 is a refresh, not an update
    assert plan.commit == "3f9c2e1a7b6d5c4e3f2a1b0c9d8e7f6a5b4c3d2e"
    changes = {c.key: c for c in plan.config_changes}
    assert changes["gpu-runtime:schedulerReplicas"] == ConfigChange("gpu-runtime:schedulerReplicas", "3", "2")
    assert changes["gpu-runtime:controlToken"] == ConfigChange("gpu-runtime:controlToken", SECRET_MASK, SECRET_MASK)
    assert "gcp:project" not in changes


def test_to_version_picks_that_update_and_keeps_its_dirty_flag(history) -> None:
    plan = choose_target(history, to_version=4)

    assert plan.target.version == 4 and plan.target.dirty
    assert plan.commit.startswith("9a1b2c3")


@pytest.mark.parametrize(("version", "message"), [
    (3, "recorded no git commit"),
    (1, "ended 'failed'"),
    (2, "not an update of this stack"),
    (7, "is the current update"),
])
def test_unusable_versions_are_refused_with_the_reason(history, version: int, message: str) -> None:
    with pytest.raises(RollbackError, match=message):
        choose_target(history, to_version=version)


@pytest.mark.parametrize("since", [7, 8])
def test_a_deploy_that_made_no_update_is_not_undone(history, since: int) -> None:
    # the deploy began at `since`: the newest update (7) is not newer, so it is someone else's, and kept
    with pytest.raises(NothingToUndo, match=f"no update newer than version {since}"):
        choose_target(history, since=since)


def test_a_deploys_own_failed_update_goes_back_to_what_ran_before_it(history) -> None:
    plan = choose_target(history, since=6)  # update 7 is this deploy's; 6 was a refresh; 5 ran before

    assert (plan.current.version, plan.target.version) == (7, 5)


def _history_pointing_at(commit: str) -> list[dict]:
    entries = json.loads((FIXTURES / "stack_history.json").read_text())
    for entry in entries:
        if entry["version"] == 5:
            entry["environment"]["git.head"] = commit
    return entries


def test_execute_deploys_the_good_commit_from_a_temporary_worktree(program, pulumi_cli, tmp_path,
                                                                   monkeypatch) -> None:
    repo, good, bad = program
    (pulumi_cli.state / "history.json").write_text(json.dumps(_history_pointing_at(good)))
    stack = AutomationStack.select("staging", repo)
    plan = choose_target(stack.history())
    validated: list[bool] = []

    pack = write_bundle(tmp_path / "policy")
    outcome = execute(plan, stack, repo, lambda path: AutomationStack.select("staging", path), tmp_path / "backups",
                      validate=lambda: validated.append(True) or True, policy_pack=pack)

    assert outcome.up_result == "succeeded" and outcome.validated and validated == [True]
    assert json.loads(outcome.backup.read_text())["deployment"]["pending_operations"]  # the pre-rollback state
    calls = pulumi_cli.calls()
    up = next(c for c in calls if c["argv"][0] == "up")
    config = next(c for c in calls if c["argv"][:2] == ["config", "set-all"])
    assert up["cwd"] == config["cwd"] != str(repo)
    assert up["argv"][up["argv"].index("--policy-pack") + 1] == str(pack)  # the rules of the operator's checkout
    restored = json.loads(config["argv"][config["argv"].index("--json") + 1])
    assert restored["gpu-runtime:controlToken"] == {"value": "s3cr3t-token-v1", "secret": True}
    assert up["config"]["gpu-runtime:controlToken"]["secure"]  # stored encrypted again
    assert up["config"]["gpu-runtime:gpuPools"][0]["name"] == "t4-spot"  # a list again, not its JSON text
    assert not Path(up["cwd"]).exists()  # the worktree is gone
    assert git(repo, "worktree", "list").count("\n") == 0
    assert git(repo, "rev-parse", "HEAD") == bad  # the operator's checkout did not move
    newest = json.loads((pulumi_cli.state / "history.json").read_text())[0]
    assert newest["environment"]["git.head"] == good  # pulumi up ran on the good commit


def test_failed_up_raises_and_names_the_backup(program, pulumi_cli, tmp_path, monkeypatch) -> None:
    repo, good, _ = program
    (pulumi_cli.state / "history.json").write_text(json.dumps(_history_pointing_at(good)))
    monkeypatch.setenv("RECORDING_PULUMI_RESULT", "failed")
    stack = AutomationStack.select("staging", repo)

    expected = r"(?s)pulumi up of commit [0-9a-f]{12} failed: .*update failed.*state backup: "
    with pytest.raises(RollbackError, match=expected):
        execute(choose_target(stack.history()), stack, repo, lambda p: AutomationStack.select("staging", p),
                tmp_path / "backups", validate=lambda: True, policy_pack=write_bundle(tmp_path / "policy"))
    assert list((tmp_path / "backups").iterdir())  # backed up before anything was changed


def test_cli_dry_run_shows_commit_and_config_and_changes_nothing(program, pulumi_cli) -> None:
    from gpurt.cli.app import app

    repo, _, _ = program
    result = CliRunner().invoke(app, ["rollback", "--stack", STACK, "--dry-run", "--work-dir", str(repo)],
                                env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    assert "3f9c2e1a7b6d" in result.output
    assert "config gpu-runtime:schedulerReplicas: '3' -> '2'" in result.output
    assert "dry run" in result.output
    assert not any(c["argv"][0] in ("up", "refresh") or c["argv"][:2] == ["stack", "import"]
                   for c in pulumi_cli.calls())


def test_cli_with_since_and_no_newer_update_changes_nothing_and_succeeds(program, pulumi_cli) -> None:
    from gpurt.cli.app import app

    repo, _, _ = program
    result = CliRunner().invoke(app, ["rollback", "--stack", STACK, "--yes", "--since", "7",
                                      "--work-dir", str(repo)], env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    assert "nothing rolled back: no update newer than version 7" in result.output
    assert not any(c["argv"][0] in ("up", "refresh") or c["argv"][:2] == ["stack", "import"]
                   for c in pulumi_cli.calls())


def test_cli_rejects_a_folder_without_a_pulumi_program(tmp_path) -> None:
    from gpurt.cli.app import app

    result = CliRunner().invoke(app, ["rollback", "--stack", STACK, "--work-dir", str(tmp_path)],
                                env={"COLUMNS": "200"})

    assert result.exit_code == 2
    assert "holds no Pulumi.yaml" in result.output


@pytest.mark.parametrize("command", [["rollback", "--dry-run"], ["state", "backup"], ["validate"]])
def test_stack_commands_refuse_a_bare_stack_name(program, tmp_path, monkeypatch, command) -> None:
    """The caller's default organization holds a ``staging`` of its own: a bare name would open that one."""
    from gpurt.cli.app import app

    cli = RecordingPulumiCli(tmp_path / "cli", stacks=(STACK, "alice/gpu-runtime/staging"), default_org="alice")
    monkeypatch.setenv("PATH", f"{cli.bin_dir}:{os.environ['PATH']}")
    repo, _, _ = program
    result = CliRunner().invoke(app, [*command, "--stack", "staging", "--work-dir", str(repo)],
                                env={"COLUMNS": "200"})

    assert result.exit_code == 2, result.output
    assert "give the fully qualified stack, ORG/gpu-runtime/STACK" in " ".join(result.output.split())
    assert cli.calls() == []  # nothing was opened


def _deploy(repo: Path, stack: str, message: str, **config: object) -> None:
    """Commit ``repo`` with these keys set in its stack file (as the deploy workflow sets them), then ``up``."""
    path = repo / f"Pulumi.{stack.rsplit('/', 1)[-1]}.yaml"
    settings = yaml.safe_load(path.read_text())
    settings["config"].update(config)
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", message)
    assert AutomationStack.select(stack, repo).up() == "succeeded"


@pytest.mark.parametrize("name", ["staging", "production"])
def test_rollback_restores_every_typed_key_of_a_committed_stack(name: str, tmp_path, monkeypatch) -> None:
    """Both committed stack files, deployed, then rolled back to: the CLI accepts every key's type again.

    A string where ``Pulumi.yaml`` declares an array or an object (``zones``, ``gpuPools``, ``network``…) is
    refused by ``pulumi up`` before anything runs, so the restored config must be the deployed one, typed.
    """
    stack = f"{ORG}/gpu-runtime/{name}"
    cli = RecordingPulumiCli(tmp_path / "cli", history=[], stacks=(stack,))
    monkeypatch.setenv("PATH", f"{cli.bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK", "1")
    repo = tmp_path / "checkout"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for file in ("Pulumi.yaml", f"Pulumi.{name}.yaml"):
        shutil.copy(REPO / file, repo / file)
    (repo / "__main__.py").write_text("RELEASE = 'good'\n")
    images = yaml.safe_load((REPO / f"Pulumi.{name}.yaml").read_text())["config"]["gpu-runtime:images"]
    _deploy(repo, stack, "good", **{
        "gpu-runtime:controlToken": {"secure": "v1:dG9rZW4="},  # "token", in the stand-in's cipher
        "gpu-runtime:images": {**images, "schedulerDigest": "sha256:" + "a" * 64,
                               "workerDigest": "sha256:" + "b" * 64}})
    (repo / "__main__.py").write_text("RELEASE = 'bad'\n")
    _deploy(repo, stack, "bad", **{"gpu-runtime:zones": ["us-central1-a"], "gpu-runtime:schedulerReplicas": 1})
    # as the CLI reads a stack file: a scalar (2, false) is its text, an object or array keeps its structure
    deployed = [{k: history_entry(v) for k, v in c["config"].items()} for c in cli.calls() if c["argv"][0] == "up"]

    current = AutomationStack.select(stack, repo)
    plan = choose_target(current.history())
    outcome = execute(plan, current, repo, lambda path: AutomationStack.select(stack, path), tmp_path / "backups",
                      validate=lambda: True, policy_pack=write_bundle(tmp_path / "policy"))

    assert outcome.up_result == "succeeded"
    rolled_back = [c for c in cli.calls() if c["argv"][0] == "up"][-1]
    assert "error" not in rolled_back
    # every key, with its type, as the good deploy had it
    assert {k: history_entry(v) for k, v in rolled_back["config"].items()} == deployed[0]
    typed = [key for key, value in deployed[0].items() if "objectValue" in value]
    assert {"gpu-runtime:zones", "gpu-runtime:network", "gpu-runtime:gpuPools", "gpu-runtime:images"} <= set(typed)
