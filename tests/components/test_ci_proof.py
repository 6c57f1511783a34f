"""CI's deploy and preview accounts: every need of `pulumi up` / `pulumi preview` granted, nothing more."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from components.ci_access import PREVIEW_ROLE
from components.rendered import Resource
from components.review.ci_proof import prove_ci
from components.review.iam_proof import Proof
from components.review.plan import CI_PROOF_RULE
from tests.components.infra import bootstrap_recording, stack_config, stack_plan

pytestmark = pytest.mark.slow  # runs both programs of both stacks
STACKS = ("staging", "production")
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
REGISTRY_MEMBER = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"


def _prove(stack: str, main: list[Resource] | None = None, bootstrap: list[Resource] | None = None) -> Proof:
    return prove_ci(
        main if main is not None else list(stack_plan(stack).resources),
        bootstrap if bootstrap is not None else list(bootstrap_recording(stack).resources),
        stack_config(stack).project,
    )


def _without(resources: list[Resource], pick: Callable[[Resource], bool]) -> list[Resource]:
    kept = [r for r in resources if not pick(r)]
    assert len(kept) < len(resources), "the test removed nothing"
    return kept


@pytest.mark.parametrize("stack", STACKS)
def test_both_ci_accounts_hold_exactly_what_their_commands_need(stack: str) -> None:
    proof = _prove(stack)
    assert proof.ok, proof.missing + proof.unused + proof.wider
    proven = "\n".join(proof.proven)
    assert "gpu-runtime-deploy: iam.serviceAccounts.actAs on service-account gpu-runtime-nodes" in proven
    assert "gpu-runtime-deploy: container.customResourceDefinitions.create" in proven
    assert "gpu-runtime-deploy: container.clusterRoles.escalate" in proven
    assert "gpu-runtime-preview: container.clusters.connect" in proven
    assert "preview: list secrets for the Helm release" in proven
    assert "preview: get deployments for the read of the live Deployment gpu-runtime/gpu-scheduler" in proven
    assert ("preview: update customresourcedefinitions for the dry-run update of CRD "
            "daskclusters.kubernetes.dask.org") in proven


@pytest.mark.parametrize("stack", STACKS)
def test_gpurt_plan_carries_the_ci_proof_as_a_rule(stack: str) -> None:
    [verdict] = [p for p in stack_plan(stack).policy if p.rule == CI_PROOF_RULE]
    assert verdict.passed


@pytest.mark.parametrize("role", ["roles/container.admin", "roles/pubsub.admin", "roles/aiplatform.viewer"])
def test_a_deploy_role_taken_away_fails_the_proof(role: str) -> None:
    bootstrap = _without(
        list(bootstrap_recording("staging").resources), lambda r: r.type == PROJECT_MEMBER and r.props["role"] == role
    )
    assert any(m.startswith("gpu-runtime-deploy lacks") for m in _prove("staging", bootstrap=bootstrap).missing)


def test_actas_on_the_nodes_account_is_needed() -> None:
    bootstrap = _without(
        list(bootstrap_recording("staging").resources), lambda r: r.props.get("role") == "roles/iam.serviceAccountUser"
    )
    assert any(
        "iam.serviceAccounts.actAs on service-account gpu-runtime-nodes" in m
        for m in _prove("staging", bootstrap=bootstrap).missing
    )


def test_a_spare_or_wider_grant_fails_the_proof() -> None:
    resources = list(bootstrap_recording("staging").resources)
    member = next(r for r in resources if r.type == PROJECT_MEMBER and "gpu-runtime-preview" in r.props["member"])
    spare = dataclasses.replace(member, name="spare", props={**member.props, "role": "roles/pubsub.admin"})
    writer = next(r for r in resources if r.type == REGISTRY_MEMBER and "deploy" in r.props["member"])
    project_wide = dataclasses.replace(writer, type=PROJECT_MEMBER, name="wide")
    proof = _prove("staging", bootstrap=[*resources, spare, project_wide])
    assert any(m.startswith("gpu-runtime-preview holds roles/pubsub.admin") for m in proof.unused)
    assert any("roles/artifactregistry.writer on the whole project" in m for m in proof.wider)


def test_the_preview_cannot_read_helm_state_without_its_role() -> None:
    helm_state = f"{PREVIEW_ROLE}-helm-releases"
    main = _without(
        list(stack_plan("staging").resources),
        lambda r: r.type.endswith(":Role") and r.props["metadata"]["name"] == helm_state,
    )
    assert any("may not list secrets" in m for m in _prove("staging", main=main).missing)


def _preview_cluster_role(main: list[Resource]) -> Resource:
    return next(r for r in main if r.type.endswith(":ClusterRole") and r.props["metadata"]["name"] == PREVIEW_ROLE)


@pytest.mark.parametrize("stack", STACKS)
def test_the_preview_reads_and_may_write_only_the_stacks_crds_by_name(stack: str) -> None:
    """Pull-request code runs with this identity, and a dry run is authorized as the real request: no write on
    workloads, Secrets or RBAC, no bind or escalate; only the CRD update a CRD change's preview makes."""
    main = list(stack_plan(stack).resources)
    bound = [r for r in main if r.type.endswith((":ClusterRole", ":Role"))
             and r.props["metadata"]["name"].startswith(PREVIEW_ROLE)]
    rules = [rule for role in bound for rule in role.props["rules"]]
    writes = [rule for rule in rules if set(rule["verbs"]) - {"get", "list"}]
    crds = sorted(r.props["metadata"]["name"] for r in main if r.type.endswith(":CustomResourceDefinition"))
    assert writes == [{"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
                       "resourceNames": crds, "verbs": ["update"]}]
    assert not [rule for rule in rules if "secrets" in rule["resources"] and rule.get("resourceNames")]


def test_a_write_or_escalation_grant_fails_the_proof() -> None:
    main = list(stack_plan("staging").resources)
    cluster_role = _preview_cluster_role(main)
    writer = dataclasses.replace(cluster_role, props={**cluster_role.props, "rules": [
        *cluster_role.props["rules"],
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "patch", "create"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "clusterroles"],
         "verbs": ["escalate", "bind"]}]})
    proof = _prove("staging", main=[writer if r is cluster_role else r for r in main])
    for verb, resource in (("patch", "deployments"), ("create", "deployments"), ("bind", "clusterroles"),
                           ("escalate", "roles")):
        assert any(f"grants {verb} on {resource}" in m and "for real" in m for m in proof.missing), (verb, resource)


def test_the_preview_may_not_dry_run_a_crd_change_without_update_on_it() -> None:
    main = list(stack_plan("staging").resources)
    cluster_role = _preview_cluster_role(main)
    no_update = dataclasses.replace(cluster_role, props={**cluster_role.props, "rules": [
        rule for rule in cluster_role.props["rules"] if "update" not in rule["verbs"]]})
    proof = _prove("staging", main=[no_update if r is cluster_role else r for r in main])
    assert any("may not update customresourcedefinitions" in m for m in proof.missing)


def _with_condition(resources: list[Resource], condition: dict | None) -> list[Resource]:
    """The bootstrap with the deploy account's project IAM admin binding under ``condition`` (None: none)."""
    def swap(r: Resource) -> Resource:
        if r.type == PROJECT_MEMBER and r.props["role"] == "roles/resourcemanager.projectIamAdmin":
            props = {k: v for k, v in r.props.items() if k != "condition"}
            return dataclasses.replace(r, props=props | ({"condition": condition} if condition else {}), shown=None)
        return r
    return [swap(r) for r in resources]


@pytest.mark.parametrize("stack", STACKS)
def test_the_deploy_account_may_grant_only_the_roles_the_main_program_grants(stack: str) -> None:
    """issue #42: projectIamAdmin let the deploy account (which runs approved pull-request code) grant anything,
    owner included; it is now conditioned on the roles it grants (IAM's modifiedGrantsByRole)."""
    bootstrap = list(bootstrap_recording(stack).resources)
    [admin] = [r for r in bootstrap if r.type == PROJECT_MEMBER and r.props["role"] ==
               "roles/resourcemanager.projectIamAdmin"]
    granted = sorted({r.props["role"] for r in stack_plan(stack).resources if r.type == PROJECT_MEMBER})
    assert admin.props["condition"]["expression"] == (
        "api.getAttribute('iam.googleapis.com/modifiedGrantsByRole', [])"
        f".hasOnly([{', '.join(repr(role) for role in granted)}])")

    unconditioned = _prove(stack, bootstrap=_with_condition(bootstrap, None))
    assert any("without a condition limiting the roles it may grant" in m for m in unconditioned.missing)


def test_a_role_the_condition_does_not_allow_or_never_needed_fails_the_proof() -> None:
    bootstrap = list(bootstrap_recording("staging").resources)
    narrow = {"title": "t", "expression": "api.getAttribute('iam.googleapis.com/modifiedGrantsByRole', [])"
              ".hasOnly(['roles/logging.logWriter', 'roles/owner'])"}
    proof = _prove("staging", bootstrap=_with_condition(bootstrap, narrow))
    assert ("the main stack grants roles/monitoring.viewer on the project, which gpu-runtime-deploy's condition "
            "does not allow") in proof.missing
    assert "gpu-runtime-deploy may grant roles/owner on the project, which the main stack never grants" in proof.unused
