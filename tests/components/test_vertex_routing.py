"""Stacks that send jobs to Vertex AI (pinned job types, overflow), rendered whole (the real ``__main__.py`` under
the plan's mocks): only such a stack tells the scheduler to use Vertex AI and grants what its calls need, the IAM
proof holds on it and fails without one of those grants, and a stack with overflow off and nothing pinned holds
none of them."""

from __future__ import annotations

import shutil

import pytest
import yaml

from components.config import ConfigError
from components.rendered import Resource
from components.review.iam_proof import prove, scheduler_settings
from components.review.plan import REPO_ROOT, Plan, run_plan
from runtime.protocol import contract
from tests.components.infra import stack_config, stack_plan

VERTEX_TYPES = ["heston_option", "option_book"]
VERTEX_GRANTS = {
    ("gpu-scheduler", "roles/aiplatform.user", "gcp:projects/iAMMember:IAMMember"),
    ("gpu-scheduler", "roles/iam.serviceAccountUser", "gcp:serviceaccount/iAMMember:IAMMember"),
    ("gpu-runtime", "roles/storage.objectUser", "gcp:storage/bucketIAMMember:BucketIAMMember"),
}


def _plan_with_vertex(root: object, types: list[str]) -> Plan:
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(REPO_ROOT / name, root / name)  # type: ignore[operator]
    stack = yaml.safe_load((REPO_ROOT / "Pulumi.staging.yaml").read_text())
    stack["config"]["gpu-runtime:vertex"]["jobTypes"] = types
    (root / "Pulumi.vertex.yaml").write_text(yaml.safe_dump(stack))  # type: ignore[operator]
    return run_plan("vertex", root)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def vertex_plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """Staging with two job types routed to Vertex AI."""
    return _plan_with_vertex(tmp_path_factory.mktemp("vertex-stack"), VERTEX_TYPES)


def _resources(plan: Plan) -> tuple[list[Resource], str]:
    project = next(r.props["project"] for r in plan.resources if r.type == "gcp:serviceaccount/account:Account")
    # The components too: the proof reads who may publish to each queue from the Pub/Sub component's input.
    return list(plan.resources), project


def _vertex_grants(resources: list[Resource], project: str) -> set[tuple[str, str, str]]:
    by_member = {f"serviceAccount:{s.email(project)}": s.account_id for s in contract.SERVICE_ACCOUNTS}
    held = {(by_member.get(str(r.props.get("member"))), str(r.props.get("role")), r.type) for r in resources}
    return held & VERTEX_GRANTS


def test_the_routing_stack_grants_what_vertex_calls_need_and_the_proof_holds(vertex_plan: Plan) -> None:
    resources, project = _resources(vertex_plan)
    proof = prove(resources, project)

    assert proof.ok, "\n".join(proof.missing + proof.unused + proof.wider)
    assert _vertex_grants(resources, project) == VERTEX_GRANTS
    assert not [line for line in proof.not_made if "VERTEX" in line]
    settings = scheduler_settings(resources)
    assert settings[contract.SchedulerEnv.VERTEX_TYPES] == ",".join(VERTEX_TYPES)
    assert settings[contract.SchedulerEnv.VERTEX_SERVICE_ACCOUNT] == contract.RUNTIME_SERVICE_ACCOUNT.email(project)
    assert settings["GPURT_VERTEX_IMAGE"].split("/")[-1].startswith("gpu-worker")


@pytest.mark.parametrize("stack", ("staging", "production"))
def test_both_committed_stacks_overflow_to_vertex_with_the_narrowest_grants(stack: str) -> None:
    # The runbook's role table: the scheduler holds roles/aiplatform.user (project: custom jobs have no IAM
    # policy of their own) and actAs on gpu-runtime only; gpu-runtime writes to the result bucket only.
    resources, project = _resources(stack_plan(stack))
    proof = prove(resources, project)

    assert proof.ok, "\n".join(proof.missing + proof.unused + proof.wider)
    assert _vertex_grants(resources, project) == VERTEX_GRANTS
    settings = scheduler_settings(resources)
    assert float(settings[contract.SchedulerEnv.VERTEX_SPILL_AFTER_S]) == stack_config(stack).vertex.overflow == 900
    assert not settings.get(contract.SchedulerEnv.VERTEX_TYPES)  # nothing pinned: Vertex AI is overflow only


@pytest.fixture(scope="module")
def off_plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """Staging with overflow off and nothing pinned: no Vertex AI call at all."""
    root = tmp_path_factory.mktemp("no-vertex-stack")
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(REPO_ROOT / name, root / name)
    stack = yaml.safe_load((REPO_ROOT / "Pulumi.staging.yaml").read_text())
    stack["config"]["gpu-runtime:vertex"]["overflow"] = "off"
    (root / "Pulumi.off.yaml").write_text(yaml.safe_dump(stack))
    return run_plan("off", root)


def test_a_stack_with_overflow_off_and_nothing_pinned_neither_grants_nor_tells_it(off_plan: Plan) -> None:
    resources, project = _resources(off_plan)

    assert prove(resources, project).ok
    assert _vertex_grants(resources, project) == set()
    routing = {contract.SchedulerEnv.VERTEX_TYPES, contract.SchedulerEnv.VERTEX_SPILL_AFTER_S,
               contract.SchedulerEnv.VERTEX_SERVICE_ACCOUNT}
    assert not routing & scheduler_settings(resources).keys()


@pytest.mark.parametrize("dropped", sorted(VERTEX_GRANTS), ids=lambda g: f"{g[0]}-{g[1]}")
def test_without_one_vertex_grant_the_routing_stack_fails_the_proof(
    vertex_plan: Plan, dropped: tuple[str, str, str]
) -> None:
    resources, project = _resources(vertex_plan)
    member = f"serviceAccount:{dropped[0]}@{project}.iam.gserviceaccount.com"
    kept = [r for r in resources if (r.props.get("member"), r.props.get("role"), r.type) != (member, *dropped[1:])]
    proof = prove(kept, project)

    assert len(kept) == len(resources) - 1
    assert proof.missing and all(line.startswith(f"{dropped[0]} lacks ") for line in proof.missing)


def test_an_unknown_job_type_is_refused_naming_the_key() -> None:
    config = stack_config("staging")
    raw = {**config.model_dump(by_alias=True, exclude={"project", "region"}, exclude_none=True)}
    raw["vertex"] = {**raw["vertex"], "jobTypes": ["heston_option", "quantum_option"]}
    from components.config import parse_stack_config

    with pytest.raises(ConfigError, match=r"vertex\.jobTypes.*unknown job types \['quantum_option'\]"):
        parse_stack_config(raw, config.project, config.region)


def test_vertex_grants_in_a_stack_that_sends_nothing_there_are_unused(off_plan: Plan) -> None:
    resources, project = _resources(off_plan)
    scheduler, runtime = contract.SCHEDULER_SERVICE_ACCOUNT, contract.RUNTIME_SERVICE_ACCOUNT
    member = f"serviceAccount:{scheduler.email(project)}"
    extra = [
        Resource("gcp:projects/iAMMember:IAMMember", "planted",
                 {"project": project, "role": "roles/aiplatform.user", "member": member}),
        Resource("gcp:serviceaccount/iAMMember:IAMMember", "planted", {
            "serviceAccountId": f"projects/{project}/serviceAccounts/{runtime.email(project)}",
            "role": "roles/iam.serviceAccountUser", "member": member}),
    ]
    proof = prove([*resources, *extra], project)

    assert proof.unused == (
        "gpu-scheduler holds roles/aiplatform.user on project, which no declared call needs",
        "gpu-scheduler holds roles/iam.serviceAccountUser on service-account gpu-runtime, which no declared call "
        "needs",
    )
