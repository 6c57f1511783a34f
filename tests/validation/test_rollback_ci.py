"""The deploy workflow's rollback path: the checkout it makes holds the rollback target, and the step fires
whenever the stack started changing and something failed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from components.review.git_worktree import WorktreeError, worktree
from tests.validation.conftest import git

pytestmark = pytest.mark.timeout(120)
DEPLOY = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "deploy.yml"


def _deploy_job() -> dict:
    return yaml.safe_load(DEPLOY.read_text())["jobs"]["deploy"]


def _checkout_depth() -> int:
    """The history the deploy job's checkout fetches: actions/checkout's fetch-depth, 1 when unset."""
    [checkout] = [s for s in _deploy_job()["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")]
    return int((checkout.get("with") or {}).get("fetch-depth", 1))


@pytest.fixture
def origin(tmp_path: Path) -> tuple[str, str, str]:
    """A bare repository served over file:// with history: (url, the good commit, the deployed bad commit)."""
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "__main__.py").write_text("RELEASE = 'good'\n")
    git(work, "add", ".")
    git(work, "commit", "-qm", "good")
    good = git(work, "rev-parse", "HEAD")
    for release in ("between", "bad"):
        (work / "__main__.py").write_text(f"RELEASE = {release!r}\n")
        git(work, "commit", "-qam", release)
    bare = tmp_path / "origin.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True, timeout=60)
    return bare.as_uri(), good, git(work, "rev-parse", "HEAD")


def _clone(url: str, depth: int, into: Path) -> Path:
    """Clone as actions/checkout does: ``fetch-depth: 0`` is the whole history, N is the last N commits."""
    shallow = [f"--depth={depth}"] if depth > 0 else []
    subprocess.run(["git", "clone", "-q", "--no-local", *shallow, url, str(into)], check=True, timeout=60)
    return into


def test_the_deploy_checkout_holds_the_rollback_target(origin, tmp_path) -> None:
    """The worktree the rollback step prepares, on a clone made as the deploy job makes it."""
    url, good, _ = origin
    clone = _clone(url, _checkout_depth(), tmp_path / "ci")

    with worktree(clone, good) as program:
        assert (program / "__main__.py").read_text() == "RELEASE = 'good'\n"
    assert git(clone, "worktree", "list").count("\n") == 0


def test_a_shallow_clone_fetches_the_target_commit_itself(origin, tmp_path) -> None:
    """An operator's (or any) depth-1 clone: the target is fetched from origin, then checked out."""
    url, good, bad = origin
    clone = _clone(url, 1, tmp_path / "shallow")
    assert git(clone, "rev-parse", "HEAD") == bad
    assert git(clone, "rev-list", "--count", "HEAD") == "1"

    with worktree(clone, good) as program:
        assert (program / "__main__.py").read_text() == "RELEASE = 'good'\n"


def test_a_commit_no_one_has_is_named_in_the_error(origin, tmp_path) -> None:
    url, _, _ = origin
    clone = _clone(url, 1, tmp_path / "shallow")
    missing = "0123456789abcdef0123456789abcdef01234567"

    with (pytest.raises(WorktreeError, match=f"commit {missing} is not in .* fetching it from origin failed"),
          worktree(clone, missing)):
        pass


def test_rollback_fires_when_pulumi_up_or_the_checklist_fails() -> None:
    steps = _deploy_job()["steps"]
    ids = [step.get("id") for step in steps]
    [up] = [s for s in steps if "pulumi up" in str(s.get("run", ""))]
    [rollback] = [s for s in steps if "gpurt rollback --stack" in str(s.get("run", ""))]
    condition = " ".join(str(rollback["if"]).split())

    assert up.get("id") == "up" and "validate" in ids
    assert ids.index("up") < ids.index("validate") < steps.index(rollback)
    assert condition == "failure() && (steps.up.outcome == 'failure' || steps.validate.outputs.exit == '1')"


@pytest.mark.parametrize(("validate_exit", "rolls_back"), [(1, True), (4, False), (0, False)])
def test_only_a_broken_verdict_rolls_back(tmp_path: Path, validate_exit: int, rolls_back: bool) -> None:
    """issue #42: a stack short of quota ("no capacity", exit 4) fails the job but is not rolled back. The step's
    own script runs with a stand-in `gpurt validate`; its recorded exit is what the rollback's condition reads."""
    steps = _deploy_job()["steps"]
    [validate] = [s for s in steps if s.get("id") == "validate"]
    [rollback] = [s for s in steps if "gpurt rollback --stack" in str(s.get("run", ""))]
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    gpurt = tmp_path / ".venv" / "bin" / "gpurt"
    gpurt.write_text(f"#!/bin/sh\nexit {validate_exit}\n")
    gpurt.chmod(0o755)
    outputs = tmp_path / "github_output"
    # GitHub runs a `run:` block with `bash -e {0}` (docs: "Workflow syntax", jobs.<job_id>.steps[*].shell).
    done = subprocess.run(["bash", "-e", "-c", validate["run"]], cwd=tmp_path, check=False, timeout=30,
                          env={**os.environ, "STACK": "staging", "GITHUB_OUTPUT": str(outputs)})

    assert done.returncode == validate_exit
    recorded = dict(line.split("=", 1) for line in outputs.read_text().split())
    assert ("steps.validate.outputs.exit == '1'" in rollback["if"]) and (recorded["exit"] == "1") is rolls_back


def test_the_up_step_runs_only_pulumi_up_and_the_rollback_undoes_only_a_newer_update() -> None:
    steps = _deploy_job()["steps"]
    ids = [step.get("id") for step in steps]
    [up] = [s for s in steps if s.get("id") == "up"]
    # a refusal before `pulumi up` (stack selection, config, the pin check, the pack) is no failure of `up`
    assert [line for line in str(up["run"]).splitlines() if line.strip()] == [
        'pulumi up --yes --stack "$STACK_REF" --policy-pack "$RUNNER_TEMP/policy-pack" --message "deploy $GITHUB_SHA"']
    [before] = [s for s in steps if s.get("id") == "before"]
    assert ids.index("before") < ids.index("up") and "pulumi stack history" in before["run"]
    [rollback] = [s for s in steps if "gpurt rollback --stack" in str(s.get("run", ""))]
    assert '--since "$SINCE"' in rollback["run"] and rollback["env"]["SINCE"] == "${{ steps.before.outputs.version }}"


def test_a_rerun_reuses_the_digest_already_pushed_under_its_tag() -> None:
    [images] = [s for s in _deploy_job()["steps"] if s.get("id") == "images"]
    script = str(images["run"])
    assert "gcloud artifacts docker images describe" in script
    assert script.index("images describe") < script.index("docker build")  # looked up before any rebuild
