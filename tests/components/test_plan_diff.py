"""gpurt plan --diff REF: two commits of a temporary git repository, planned and compared (resources, policy,
cost), as Markdown and JSON; and the comparison's own rules on small hand-made plans."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from components.review import plan as plan_module
from components.review import plan_ref
from components.review.cost import PRICING_DIR
from components.review.plan import REPO_ROOT, Plan, run_plan
from components.review.plan_diff import MAX_ROWS, changed_paths, diff_plans, to_markdown
from components.review.plan_ref import plan_at_ref
from gpurt.cli.app import app as gpurt_app

pytestmark = pytest.mark.slow  # plans the whole program twice (the base in a child process)
PRICES = yaml.safe_load((PRICING_DIR / "us-central1.yaml").read_text())
KEY = ('\nimport pulumi_gcp as gcp\n'
       'gcp.serviceaccount.Key("ci-key", service_account_id=identities.accounts["gpu-runtime"].name)\n')


def _git(repo: Path, *args: str) -> None:
    _git_out(repo, *args)


def _git_out(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=test", "-c", "user.email=test@example.com", *args],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository of the project's program and staging stack: commit 1 as committed here; commit 2
    renames the T4 pool and raises its maximum (a pool removed, one added, the Dask cluster changed) and
    adds a service-account key (a resource added, a policy rule broken)."""
    root = tmp_path_factory.mktemp("project")
    for name in ("Pulumi.yaml", "Pulumi.staging.yaml", "__main__.py"):
        (root / name).write_text((REPO_ROOT / name).read_text())
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "base")
    stack = yaml.safe_load((root / "Pulumi.staging.yaml").read_text())
    [pool] = stack["config"]["gpu-runtime:gpuPools"]
    pool.update(name="t4", maxNodes=3)
    (root / "Pulumi.staging.yaml").write_text(yaml.safe_dump(stack, sort_keys=False))
    (root / "__main__.py").write_text((root / "__main__.py").read_text() + KEY)
    _git(root, "commit", "-q", "-am", "head")
    return root


@pytest.fixture(scope="module")
def base(repo: Path) -> dict[str, Any]:
    """The plan of HEAD~1, made the way --diff makes it: a worktree and a child process (the slow part)."""
    plan = plan_at_ref("staging", "HEAD~1", repo)
    assert not [line for line in _git_out(repo, "worktree", "list").splitlines()[1:]]  # the worktree is gone
    return plan


@pytest.fixture(scope="module")
def head(repo: Path) -> Plan:
    """The plan of HEAD, rendered once in this process, as ``gpurt plan --project-dir`` renders it: every command
    below is served it instead of rendering the same commit again (three renders, seconds of CPU each)."""
    return run_plan("staging", repo)


def _plan_cli(repo: Path, head: Plan, *options: str, base: dict[str, Any] | None = None) -> Any:
    """``gpurt plan --stack staging --project-dir REPO [OPTIONS]``, the head's plan served from its fixture, and
    the plan of HEAD~1 too when ``base`` is given (both made once)."""
    def planned(stack: str, project_dir: Path | None) -> Plan:
        assert (stack, project_dir) == ("staging", repo)
        return head

    def served(stack: str, ref: str, project_dir: Path) -> dict[str, Any]:
        assert (stack, ref, project_dir) == ("staging", "HEAD~1", repo)
        return base  # type: ignore[return-value]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plan_module, "run_plan", planned)
        if base is not None:
            patch.setattr(plan_ref, "plan_at_ref", served)
        return CliRunner().invoke(gpurt_app, ["plan", "--stack", "staging", "--project-dir", str(repo), *options])


@pytest.fixture(scope="module")
def as_json(repo: Path, head: Plan, base: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    result = _plan_cli(repo, head, "--diff", "HEAD~1", "--json", base=base)
    return result.exit_code, json.loads(result.stdout)


def _pool_month(nodes: int) -> float:
    """Staging's T4 node (n1-standard-8 + 1 T4, 100 GB balanced disk) on spot at the band's shallowest end."""
    compute = (PRICES["machines"]["n1-standard-8"]["hourly"] + PRICES["gpus"]["nvidia-tesla-t4"]) * 730
    return nodes * (compute * (1 - PRICES["spotDiscount"]["min"]) + 100 * PRICES["diskPerGbMonth"]["pd-balanced"])


def test_diff_names_what_was_added_changed_and_removed(as_json: tuple[int, dict[str, Any]]) -> None:
    code, diff = as_json
    assert code == 1  # the head breaks a policy rule, as a plain plan would say
    assert diff["ref"] == "HEAD~1" and diff["stack"] == "staging"
    added = {(c["type"], c["name"]) for c in diff["added"]}
    assert added == {("gcp:serviceaccount/key:Key", "ci-key"), ("gcp:container/nodePool:NodePool", "gke-gpu-t4")}
    assert [(c["type"], c["name"]) for c in diff["removed"]] == [("gcp:container/nodePool:NodePool", "gke-gpu-t4-spot")]
    changed = {c["name"]: c["inputs"] for c in diff["changed"]}
    assert "spec.worker.metadata.labels.gpu-runtime.dev/pool" in changed["dask-daskcluster-gpu-dask"]
    assert diff["resources"]["head"] == diff["resources"]["base"] + 1


def test_diff_reports_policy_and_cost_changes(as_json: tuple[int, dict[str, Any]]) -> None:
    _, diff = as_json
    [keys] = [r for r in diff["policy"] if r["rule"] == "no-service-account-keys"]
    assert (keys["base"], keys["head"]) == (True, False) and keys["violations"][0].startswith("ci-key: ")
    pools = {p["pool"]: p for p in diff["cost"]["pools"]}
    # Two zones: 2 -> 3 nodes per zone, the pool's name changed with it.
    assert pools["gpu-t4-spot"]["head"] is None and pools["gpu-t4"]["base"] is None
    assert pools["gpu-t4-spot"]["base"]["high"] == pytest.approx(_pool_month(4), abs=0.01)
    assert pools["gpu-t4"]["head"]["high"] == pytest.approx(_pool_month(6), abs=0.01)
    total = diff["cost"]["total"]
    assert total["head"]["high"] - total["base"]["high"] == pytest.approx(_pool_month(2), abs=0.02)


def test_markdown_of_the_same_diff(repo: Path, head: Plan, base: dict[str, Any]) -> None:
    result = _plan_cli(repo, head, "--diff", "HEAD~1", base=base)
    assert result.exit_code == 1
    text = result.stdout
    assert text.startswith("### `staging`: 2 to add, ")
    assert "1 to remove; **policy violations**" in text
    assert "| no-service-account-keys | pass | **FAIL** | ci-key: service-account keys are forbidden" in text
    assert "| gpu-t4 | - | $" in text and "| **total** |" in text


def test_an_unknown_revision_is_a_clear_error(repo: Path, head: Plan) -> None:
    result = _plan_cli(repo, head, "--diff", "no-such-branch")
    assert result.exit_code == 2
    assert "plan of no-such-branch failed" in result.output and "Traceback" not in result.output


def _plan(resources: list[dict[str, Any]], rules: dict[str, bool]) -> dict[str, Any]:
    return {"stack": "s", "resources": resources,
            "policy": [{"rule": r, "passed": ok, "violations": [] if ok else [{"resource": "x", "message": "m"}]}
                       for r, ok in rules.items()]}


def _resource(name: str, **fields: Any) -> dict[str, Any]:
    return {"urn": f"urn:{name}", "type": "t:m:T", "name": name, "custom": True, "inputs": {}, **fields}


def test_changed_paths_descend_into_maps_and_lists_and_compare_options() -> None:
    base = _resource("a", inputs={"spec": {"replicas": 1, "ports": [{"port": 80}]}, "same": 1}, protect=False)
    head = _resource("a", inputs={"spec": {"replicas": 2, "ports": [{"port": 80}, {"port": 443}]}, "same": 1},
                     protect=True)
    assert changed_paths(base, head) == ("spec.ports[1].port", "spec.replicas", "(protect)")


def test_long_diffs_are_cut_and_rules_only_on_one_side_are_shown() -> None:
    base = _plan([], {"old-rule": True, "kept": True})
    head = _plan([_resource(f"r{i:03}") for i in range(MAX_ROWS + 5)], {"kept": True, "new-rule": True})
    diff = diff_plans(base, head, "main")
    text = to_markdown(diff)
    assert f"#### Added ({MAX_ROWS + 5})" in text and "| ... | 5 more" in text
    assert "| old-rule | pass | - | - |" in text and "| new-rule | - | pass | - |" in text
    assert "No pricing table" in text  # no cluster, so no region to price


def test_a_change_under_a_resources_own_replace_on_changes_is_marked_replace() -> None:
    """The DaskCluster is replaced when its scheduler revision changes (replace_on_changes, not the provider's
    list); an image change elsewhere in its spec is an update."""
    label = "spec.scheduler.metadata.labels.gpu-runtime.dev/scheduler-revision"
    options = {"type": "kubernetes:kubernetes.dask.org/v1:DaskCluster",
               "replace_on_changes": ["spec.scheduler.metadata"]}

    def cluster(revision: str, image: str) -> dict[str, Any]:
        inputs = {"spec": {"scheduler": {"metadata": {"labels": {"gpu-runtime.dev/scheduler-revision": revision}},
                                         "spec": {"containers": [{"image": image}]}}}}
        return _resource("gpu-dask", inputs=inputs, **options)

    base = _plan([cluster("dask-1-py311-a", "s@sha256:1")], {})
    new_image = diff_plans(base, _plan([cluster("dask-1-py311-a", "s@sha256:2")], {}), "main")
    new_dask = diff_plans(base, _plan([cluster("dask-2-py311-a", "s@sha256:2")], {}), "main")
    assert [c.replace for c in new_image.changed] == [()]
    assert [c.replace for c in new_dask.changed] == [(label,)]
    assert "**replace**" in to_markdown(new_dask)


def test_a_revision_from_before_the_review_package_is_planned_by_its_own_plan_module(tmp_path: Path) -> None:
    """A revision whose plan code is still ``components/plan.py`` (before ``components/review/``): --diff against
    it must run that revision's own planner, not fail on the package it does not have yet."""
    package = tmp_path / "components"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "plan.py").write_text(
        "class _Plan:\n"
        "    def __init__(self, stack):\n        self.stack = stack\n"
        "    def to_json(self):\n        return {'stack': self.stack, 'planner': 'components/plan.py'}\n\n\n"
        "def run_plan(stack, project_dir):\n    return _Plan(stack)\n")
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "old layout")
    assert plan_at_ref("staging", "HEAD", tmp_path) == {"stack": "staging", "planner": "components/plan.py"}
