"""A stack that routes job types to Vertex AI, rendered whole (the real ``__main__.py`` under the plan's mocks):
only such a stack tells the scheduler to route there and grants what Vertex AI calls need, and the IAM proof
holds on it and fails without one of those grants."""

from __future__ import annotations

import shutil

import pytest
import yaml

from components.config import ConfigError
from components.iam_proof import prove, scheduler_settings
from components.plan import REPO_ROOT, Plan, run_plan
from components.rendered import Resource
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
    return [r for r in plan.resources if r.custom], project


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
def test_a_stack_routing_nothing_to_vertex_neither_grants_nor_tells_it(stack: str) -> None:
    resources, project = _resources(stack_plan(stack))

    assert _vertex_grants(resources, project) == set()
    routing = {contract.SchedulerEnv.VERTEX_TYPES, contract.SchedulerEnv.VERTEX_SERVICE_ACCOUNT}
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
