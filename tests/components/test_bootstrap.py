"""The bootstrap program makes what a stack and CI need before the first deploy, with the least roles."""

from __future__ import annotations

import pytest

from components.bootstrap import (
    BASE_APIS,
    DEPLOY_PROJECT_ROLES,
    PREVIEW_PROJECT_ROLES,
    github_condition,
)
from components.review.plan import Recording, fake_project_number
from tests.components.infra import (
    GITHUB_OWNER_ID,
    GITHUB_REPOSITORY,
    GITHUB_REPOSITORY_ID,
    bootstrap_recording,
    named,
    of_type,
    stack_config,
)

STACKS = ("staging", "production")
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
SA_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"


@pytest.fixture(scope="module", params=STACKS)
def stack(request: pytest.FixtureRequest) -> tuple[str, str, Recording]:
    return request.param, stack_config(request.param).project, bootstrap_recording(request.param)


def _email(account: str, project: str) -> str:
    return f"{account}@{project}.iam.gserviceaccount.com"


def test_the_apis_ci_and_the_main_program_call_first_are_enabled_and_never_disabled(stack) -> None:
    _, project, recording = stack
    services = of_type(recording, "gcp:projects/service:Service")
    assert (
        {s.props["service"] for s in services}
        == set(BASE_APIS)
        >= {
            "serviceusage.googleapis.com",
            "cloudresourcemanager.googleapis.com",
            "artifactregistry.googleapis.com",
            "iam.googleapis.com",
            "iamcredentials.googleapis.com",
            "sts.googleapis.com",
            "container.googleapis.com",
        }
    )
    assert all(s.props["project"] == project and s.props["disableOnDestroy"] is False for s in services)


def test_the_registry_the_deploy_pushes_to_is_made_here_protected_and_immutable(stack) -> None:
    name, project, recording = stack
    [repo] = of_type(recording, "gcp:artifactregistry/repository:Repository")
    config = stack_config(name)
    assert (repo.props["project"], repo.props["location"], repo.props["repositoryId"], repo.props["format"]) == (
        project,
        config.region,
        config.images.repository,
        "DOCKER",
    )
    assert repo.props["dockerConfig"] == {"immutableTags": True}
    assert repo.protect  # every image a rollback may need
    assert recording.outputs["registry_url"] == f"{config.region}-docker.pkg.dev/{project}/{config.images.repository}"


def test_the_ci_accounts_hold_exactly_their_roles_and_the_registry_grants(stack) -> None:
    _, project, recording = stack
    deploy = f"serviceAccount:{_email('gpu-runtime-deploy', project)}"
    preview = f"serviceAccount:{_email('gpu-runtime-preview', project)}"
    project_roles = {(m.props["member"], m.props["role"]) for m in of_type(recording, PROJECT_MEMBER)}
    assert project_roles == {(deploy, r) for r in DEPLOY_PROJECT_ROLES} | {(preview, r) for r in PREVIEW_PROJECT_ROLES}
    assert "roles/container.admin" in DEPLOY_PROJECT_ROLES  # CRDs, ClusterRoles, Helm's Secrets
    assert not {"roles/owner", "roles/editor", "roles/iam.serviceAccountUser"} & {r for _, r in project_roles}
    registry = {
        (m.props["member"], m.props["role"], m.props["repository"])
        for m in of_type(recording, "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember")
    }
    assert registry == {
        (deploy, "roles/artifactregistry.writer", "gpu-runtime"),
        (preview, "roles/artifactregistry.reader", "gpu-runtime"),
    }


def test_the_deploy_may_act_as_the_nodes_account_and_no_other(stack) -> None:
    _, project, recording = stack
    named(recording, "gcp:serviceaccount/account:Account", "bootstrap-gpu-runtime-nodes")
    acting = [m for m in of_type(recording, SA_MEMBER) if m.props["role"] == "roles/iam.serviceAccountUser"]
    assert [(m.props["serviceAccountId"], m.props["member"]) for m in acting] == [
        (
            f"projects/{project}/serviceAccounts/{_email('gpu-runtime-nodes', project)}",
            f"serviceAccount:{_email('gpu-runtime-deploy', project)}",
        )
    ]


def test_github_federation_admits_this_repository_only_and_each_job_its_own_account(stack) -> None:
    name, project, recording = stack
    [provider] = of_type(recording, "gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider")
    assert provider.props["oidc"] == {"issuerUri": "https://token.actions.githubusercontent.com"}
    # by GitHub's immutable ids: a name someone else registers after a rename or deletion is not admitted
    assert provider.props["attributeCondition"] == (
        f"assertion.repository_id == '{GITHUB_REPOSITORY_ID}' && assertion.repository_owner_id == '{GITHUB_OWNER_ID}'")
    assert provider.props["attributeMapping"]["google.subject"] == "assertion.sub"
    pool = f"projects/{fake_project_number(project)}/locations/global/workloadIdentityPools/github"
    bindings = {
        (m.props["serviceAccountId"].rsplit("/", 1)[-1], m.props["member"])
        for m in of_type(recording, SA_MEMBER)
        if m.props["role"] == "roles/iam.workloadIdentityUser"
    }
    subject = f"principal://iam.googleapis.com/{pool}/subject/repo:{GITHUB_REPOSITORY}:environment:"
    # The deploy job runs in the environment named after the stack, the preview in `preview` (its reviewers).
    assert bindings == {
        (_email("gpu-runtime-deploy", project), subject + name),
        (_email("gpu-runtime-preview", project), subject + "preview"),
    }
    assert recording.outputs["workload_identity_provider"] == f"{pool}/providers/github-actions"


@pytest.mark.parametrize("bad", ["gpu-runtime", "a/b/c", "o/r' || true || '", ""])
def test_a_repository_that_is_not_owner_slash_name_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="OWNER/NAME"):
        github_condition(bad, "1", "2")


@pytest.mark.parametrize(("repository_id", "owner_id"), [("", "2"), ("1", "impulse-risk"), ("1' || true || '", "2")])
def test_ids_that_are_not_githubs_numbers_are_refused(repository_id: str, owner_id: str) -> None:
    with pytest.raises(ValueError, match="numeric id"):
        github_condition("o/r", repository_id, owner_id)
