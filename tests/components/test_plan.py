"""The offline plan: the real program for both stacks, its JSON, secrets, and policy failures."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from components.policy import rules
from components.rendered import Resource
from components.review.plan import (
    MASK,
    REPO_ROOT,
    SECRET_PLACEHOLDER,
    STACKS,
    Plan,
    PlanError,
    load_stack_settings,
    run_plan,
)
from gpurt.cli import plan as plan_commands
from gpurt.cli.app import app as gpurt_app
from runtime.protocol import contract
from tests.components.infra import committed_plans_served, stack_plan

# Each test module run executes the whole Pulumi program twice (a few seconds of imports and mocks).
pytestmark = pytest.mark.slow

EXPECTED_TYPES = {
    "gcp:pubsub/topic:Topic", "gcp:pubsub/subscription:Subscription", "gcp:serviceaccount/account:Account",
    "gcp:projects/iAMMember:IAMMember", "gcp:serviceaccount/iAMMember:IAMMember", "gcp:container/cluster:Cluster",
    "gcp:container/nodePool:NodePool", "gcp:storage/bucket:Bucket",
    "gcp:projects/service:Service", "gcp:compute/routerNat:RouterNat", "pulumi:providers:kubernetes",
}
EXPORTS = {
    "cluster_name", "kubeconfig", "topics", "subscriptions", "service_accounts", "scheduler_url", "result_bucket",
    "result_store_url", "registry_url", "vertex_job_settings",
}


@pytest.fixture(scope="module")
def plans() -> dict[str, Plan]:
    return {stack: stack_plan(stack) for stack in STACKS}  # shared with the other tests of the rendered stacks


@pytest.mark.parametrize("stack", STACKS)
def test_whole_platform_passes_policy(plans: dict[str, Plan], stack: str) -> None:
    plan = plans[stack]
    failures = [v for result in plan.policy for v in result.violations]
    assert failures == [] and plan.ok
    assert {r.type for r in plan.resources} >= EXPECTED_TYPES


@pytest.mark.parametrize("stack", STACKS)
def test_every_resource_is_parented_by_a_component(plans: dict[str, Plan], stack: str) -> None:
    plan = plans[stack]
    components = {r.urn for r in plan.resources if not r.custom}
    orphans = [r.name for r in plan.resources if r.custom and r.parent not in components]
    assert orphans == []
    assert all(r.type.startswith("gpu-runtime:") for r in plan.resources if not r.custom)


@pytest.mark.parametrize("stack", STACKS)
def test_exports_an_operator_needs(plans: dict[str, Plan], stack: str) -> None:
    outputs = plans[stack].outputs
    assert set(outputs) >= EXPORTS
    assert outputs["cluster_name"] == "gpu-scheduler"
    assert outputs["scheduler_url"] == "http://gpu-scheduler.gpu-runtime.svc.cluster.local:8080"
    # The contract's, and a topic and scheduler subscription per desk queue of the stack file (issue #45).
    desks = {"staging": ("rates-desk", "credit-desk"), "production": ("rates-desk", "credit-desk", "market-risk")}
    assert set(outputs["topics"]) == {t.name for t in contract.TOPICS} | {f"gpu-job-request-{d}" for d in desks[stack]}
    assert set(outputs["subscriptions"]) == {s.name for s in contract.SUBSCRIPTIONS} | {
        f"gpu-job-request-{d}-sub" for d in desks[stack]}
    assert set(outputs["service_accounts"]) == {"gpu-scheduler", "gpu-runtime"}
    assert outputs["kubeconfig"] == MASK


def test_gpu_pools_per_stack(plans: dict[str, Plan]) -> None:
    def accelerators(plan: Plan) -> list[str]:
        return sorted(
            r.props["nodeConfig"]["guestAccelerators"][0]["type"] for r in plan.resources
            if r.type == "gcp:container/nodePool:NodePool" and r.props["nodeConfig"].get("guestAccelerators")
        )

    assert accelerators(plans["staging"]) == ["nvidia-tesla-t4"]
    assert accelerators(plans["production"]) == ["nvidia-tesla-a100", "nvidia-tesla-t4", "nvidia-tesla-v100"]


def test_json_masks_secrets_and_lists_placeholders(plans: dict[str, Plan]) -> None:
    document = plans["production"].to_json()
    text = json.dumps(document)
    assert SECRET_PLACEHOLDER not in text and "gke-gcloud-auth-plugin" not in text
    assert document["placeholders"] == ["gpu-runtime:controlToken"]
    assert document["ok"] is True
    assert {p["rule"] for p in document["policy"]} >= {"pubsub-dead-letter", "dead-letter-topics-subscribed"}


def test_stack_settings_merge_defaults_and_replace_secure_values(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.yaml").write_text(textwrap.dedent("""\
        name: demo
        runtime: python
        config:
          replicas: {type: integer, default: 2}
          pools: {default: [{name: a}]}
          token: {secret: true}
          apiKey: {secret: true}
    """))
    (tmp_path / "Pulumi.dev.yaml").write_text(textwrap.dedent("""\
        config:
          gcp:project: p
          demo:replicas: 3
          demo:apiKey:
            secure: v1:AAAAencrypted
    """))
    settings = load_stack_settings("dev", tmp_path)
    assert settings.config == {
        "demo:replicas": "3", "demo:pools": '[{"name": "a"}]', "gcp:project": "p",
        "demo:apiKey": SECRET_PLACEHOLDER, "demo:token": SECRET_PLACEHOLDER,
    }
    assert set(settings.placeholders) == set(settings.secret_keys) == {"demo:apiKey", "demo:token"}


def test_unknown_stack_is_a_clear_error() -> None:
    with pytest.raises(PlanError, match=r"no stack 'qa'.*staging"):
        run_plan("qa")


@pytest.fixture
def violating_project(tmp_path: Path) -> Path:
    """A copy of the project whose program adds a service-account key."""
    root = Path(__file__).resolve().parents[2]
    for name in ("Pulumi.yaml", "Pulumi.staging.yaml"):
        (tmp_path / name).write_text((root / name).read_text())
    main = (root / "__main__.py").read_text()
    main += ('\nimport pulumi_gcp as gcp\n'
             'gcp.serviceaccount.Key("ci-key", service_account_id=identities.accounts["gpu-runtime"].name)\n')
    (tmp_path / "__main__.py").write_text(main)
    return tmp_path


def test_cli_exits_1_on_a_violation(violating_project: Path) -> None:
    result = CliRunner().invoke(
        gpurt_app, ["plan", "--stack", "staging", "--json", "--project-dir", str(violating_project)]
    )
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    [keys] = [p for p in document["policy"] if p["rule"] == "no-service-account-keys"]
    assert keys["violations"] == [
        {"resource": "ci-key", "message": "service-account keys are forbidden; use Workload Identity"},
    ]


def test_cli_table_and_exit_0() -> None:
    with committed_plans_served():  # the staging plan the tests above read, not a render of its own
        result = CliRunner().invoke(gpurt_app, ["plan", "--stack", "staging"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "gke-gpu-t4-spot" in result.output and "dead-letter-topics-subscribed" in result.output
    assert "kubeconfig = [secret]" in result.output
    assert "estimated monthly cost" in result.output and "cluster fee" in result.output


def test_project_dir_stacks_are_accepted_and_unknown_ones_listed(violating_project: Path) -> None:
    """--stack names a stack of the --project-dir, not only this checkout's staging and production."""
    (violating_project / "Pulumi.staging.yaml").rename(violating_project / "Pulumi.qa.yaml")
    args = ["plan", "--json", "--project-dir", str(violating_project), "--stack"]

    result = CliRunner().invoke(gpurt_app, [*args, "qa"])
    assert result.exit_code == 1, result.output  # planned: only the service-account key violates a rule
    assert json.loads(result.stdout)["stack"] == "qa"

    unknown = CliRunner().invoke(gpurt_app, [*args, "staging"])
    assert unknown.exit_code == 2
    assert "no stack 'staging' (no Pulumi.staging.yaml); stacks here: qa" in unknown.output


def test_cli_reports_program_errors_without_traceback(violating_project: Path) -> None:
    (violating_project / "Pulumi.staging.yaml").write_text("config:\n  gcp:project: p\n")
    result = CliRunner().invoke(gpurt_app, ["plan", "--stack", "staging", "--project-dir", str(violating_project)])
    assert result.exit_code == 2
    assert "missing stack config in Pulumi.staging.yaml: gcp:region" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "kind", ["kubernetes:apps/v1:Deployment", "kubernetes:kubernetes.dask.org/v1:DaskCluster",
             "kubernetes:apps/v1:DaemonSet"],
)
def test_rules_see_the_containers_of_real_workloads(plans: dict[str, Plan], kind: str) -> None:
    """The rules read the shapes the program really declares: strip limits and each container is reported."""
    [workload] = [r for r in plans["production"].resources if r.type == kind]
    stripped = copy.deepcopy(dict(workload.props))
    count = 0
    for container in _all_containers(stripped):
        container.pop("resources", None)
        count += 1
    assert count > 0
    assert len(rules.check_container_limits(Resource(kind, workload.name, stripped))) == count


def _all_containers(node: object) -> list[dict]:
    if isinstance(node, dict):
        found = list(node.get("containers", []))
        for key, value in node.items():
            if key != "containers":
                found += _all_containers(value)
        return found
    if isinstance(node, list):
        return [c for item in node for c in _all_containers(item)]
    return []


def test_key_settings_summarise_what_reviewers_check(plans: dict[str, Plan]) -> None:
    by_name = {r.name: r for r in plans["staging"].resources}
    subscription = plan_commands.key_settings(by_name["pubsub-gpu-job-request-sub"])
    assert "ackDeadlineSeconds=600" in subscription and "maxDeliveryAttempts=5" in subscription
    pool = plan_commands.key_settings(by_name["gke-gpu-t4-spot"])
    assert "taints=[nvidia.com/gpu=present:NO_SCHEDULE]" in pool and "spot=true" in pool
    assert "guestAccelerators=[1x nvidia-tesla-t4]" in pool
    assert plan_commands.key_settings(by_name["scheduler-deployment-gpu-scheduler"]) == "gpu-runtime/gpu-scheduler"


def test_dependencies_are_recorded(plans: dict[str, Plan]) -> None:
    by_name = {r.name: r for r in plans["production"].resources}
    dlq_topic = by_name["pubsub-gpu-job-request-dlq"].urn
    assert dlq_topic in by_name["pubsub-gpu-job-request-sub"].dependencies


def test_two_resources_with_one_urn_fail_the_plan_as_pulumi_up_would() -> None:
    import pulumi_gcp as gcp

    from components.review.plan import DuplicateUrnError, record

    def program() -> None:
        gcp.pubsub.Topic("requests", name="a")
        gcp.pubsub.Topic("requests", name="b")  # a second resource under the first one's name

    with pytest.raises(DuplicateUrnError, match="share the name 'requests'"):
        record(program, project="acme-risk", region="europe-west4")


# A refused registration, then the recording that lets the SDK's futures of it go, in a process of its own: what a
# user's terminal or a CI log shows of it is that process's stderr.
REFUSED_THEN_RECORDED = """
import gc
import pulumi_gcp as gcp
from components.review.plan import DuplicateUrnError, record

def program():
    gcp.pubsub.Topic("requests", name="a")
    gcp.pubsub.Topic("requests", name="b")

try:
    record(program, project="acme-risk", region="europe-west4")
except DuplicateUrnError:
    print("refused")
record(lambda: gcp.pubsub.Topic("requests"), project="acme-risk", region="europe-west4")
gc.collect()
"""


@pytest.mark.timeout(120)
def test_a_refused_registration_is_raised_once_not_logged_again_for_each_future() -> None:
    # Without the loop's handler, the next recording let 26 futures go, each logged with its traceback.
    done = subprocess.run([sys.executable, "-c", REFUSED_THEN_RECORDED], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=100, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "refused", done.stderr[-2000:]
    assert "never retrieved" not in done.stderr, done.stderr[-2000:]


def test_a_program_records_after_asyncio_run_left_the_thread_without_a_loop() -> None:
    import asyncio

    import pulumi_gcp as gcp

    from components.review.plan import record

    asyncio.run(asyncio.sleep(0))  # as a notebook cell or an earlier test may have: no current loop after it
    recording = record(lambda: gcp.pubsub.Topic("requests"), project="acme-risk", region="europe-west4")
    assert [r.name for r in recording.resources] == ["requests"]
