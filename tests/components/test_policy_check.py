"""A pull request's plan judged by another checkout's rules: ``judge_plan_json`` and ``gpurt policy check``
read what ``gpurt plan --json`` wrote and give the verdict of the rules of the code running them."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from components.review.plan import IAM_PROOF_RULE, judge_plan_json
from runtime.protocol import contract
from tests.components.infra import stack_plan


def _with_project_object_admin(plan: dict) -> dict:
    """The plan with gpu-runtime's old project-wide objectAdmin grant added."""
    project = next(r["inputs"]["project"] for r in plan["resources"]
                   if r["type"] == "gcp:serviceaccount/account:Account")
    extra = {"type": "gcp:projects/iAMMember:IAMMember", "name": "old-grant", "urn": "urn:old", "parent": None,
             "custom": True, "dependencies": [], "protect": False, "delete_before_replace": True,
             "ignore_changes": [], "provider": None,
             "inputs": {"project": project, "role": "roles/storage.objectAdmin",
                        "member": f"serviceAccount:{contract.RUNTIME_SERVICE_ACCOUNT.email(project)}"}}
    return {**plan, "resources": [*plan["resources"], extra]}


def test_the_verdict_on_a_written_plan_is_the_plans_own() -> None:
    plan = stack_plan("production")
    verdicts = judge_plan_json(json.loads(json.dumps(plan.to_json(), default=str)))

    assert [(v.rule, v.passed) for v in verdicts] == [(p.rule, p.passed) for p in plan.policy]


def test_a_violation_in_the_written_plan_fails_with_the_rule_and_the_message(tmp_path: Path) -> None:
    from gpurt.cli.app import app

    good = tmp_path / "plan-staging.json"
    bad = tmp_path / "plan-production.json"
    good.write_text(json.dumps(stack_plan("staging").to_json(), default=str))
    bad.write_text(json.dumps(_with_project_object_admin(json.loads(json.dumps(stack_plan("production").to_json(),
                                                                                 default=str)))))
    result = CliRunner().invoke(app, ["policy", "check", str(good), str(bad)], env={"COLUMNS": "200"})

    assert result.exit_code == 1, result.output
    assert "### Policy, stack staging: pass" in result.output
    assert "### Policy, stack production: FAIL" in result.output
    # with Vertex AI overflow on, gpu-runtime writes job outputs to the result bucket: too wide, not needless
    assert (f"- `{IAM_PROOF_RULE}` on `stack`: gpu-runtime holds roles/storage.objectAdmin on the whole project, but "
            "its calls need it only on result-bucket: bind it there") in result.output


def test_a_file_that_is_not_a_plan_is_refused_by_name(tmp_path: Path) -> None:
    from gpurt.cli.app import app

    path = tmp_path / "notes.json"
    path.write_text(json.dumps({"stack": "staging", "resources": [{"type": "x"}]}))
    result = CliRunner().invoke(app, ["policy", "check", str(path)], env={"COLUMNS": "200"})

    assert result.exit_code == 2
    assert f"error: {path}: not a plan written by gpurt plan --json" in result.output
