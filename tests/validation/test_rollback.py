"""Rollback: target choice from real-format stack history, then the redeploy through pulumi.automation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from components.policy.bundle import write_bundle
from tests.validation.conftest import git
from tests.validation.recording_pulumi_cli import FIXTURES
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
    assert "--secret" in config["argv"] and "gpu-runtime:controlToken=s3cr3t-token-v1" in config["argv"]
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
    result = CliRunner().invoke(app, ["rollback", "--stack", "staging", "--dry-run", "--work-dir", str(repo)],
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
    result = CliRunner().invoke(app, ["rollback", "--stack", "staging", "--yes", "--since", "7",
                                      "--work-dir", str(repo)], env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    assert "nothing rolled back: no update newer than version 7" in result.output
    assert not any(c["argv"][0] in ("up", "refresh") or c["argv"][:2] == ["stack", "import"]
                   for c in pulumi_cli.calls())


def test_cli_rejects_a_folder_without_a_pulumi_program(tmp_path) -> None:
    from gpurt.cli.app import app

    result = CliRunner().invoke(app, ["rollback", "--stack", "staging", "--work-dir", str(tmp_path)],
                                env={"COLUMNS": "200"})

    assert result.exit_code == 2
    assert "holds no Pulumi.yaml" in result.output
