"""What a stack needs before its first ``pulumi up``, as the bootstrap program (``bootstrap/``) declares it.

One Google Cloud project per stack. The bootstrap makes, once and idempotently, everything the main program
and CI rely on but cannot make for themselves:

- the APIs CI and the main program call before the main program enables the rest (IAM Credentials and STS
  for Workload Identity Federation, Artifact Registry for the image push, ...);
- the Artifact Registry repository the deploy pushes to *before* ``pulumi up`` runs; the main program only
  reads it (``gcp.artifactregistry.get_repository``), so nothing is created twice (a 409);
- the GKE nodes' service account, so that the deploy identity can be given ``actAs`` on exactly that account
  (GKE: "to set a service account on nodes, you must also have the Service Account User role on the
  user-managed service account that your nodes will use"); the main program reads it and grants its roles;
- the deploy and preview service accounts with the roles ``components.review.ci_proof`` proves sufficient and needed;
- CI's Workload Identity Federation: a pool, a GitHub OIDC provider whose attribute condition admits tokens of
  this repository only, and bindings that let the deploy job (GitHub environment named after the stack) act as
  the deploy account and the preview job (environment ``preview``) as the preview account.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pulumi
import pulumi_gcp as gcp
import yaml

from components.iam import WORKLOAD_IDENTITY_ROLE, granted_project_roles, role_suffix
from runtime.protocol import contract

# The first three are what every later call needs: Service Usage enables APIs, Cloud Resource Manager reads and
# changes the project's IAM policy, Cloud Billing tells whether the project can run anything that costs money.
# `gpurt bootstrap` enables them with gcloud before this program runs (the
# provider cannot enable the API it enables APIs with); they are declared here too, so the stack owns them.
BASE_APIS: Final = (
    "serviceusage.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    # `gpurt bootstrap --check` reads the project's billing with the deploy account, whose calls are billed to
    # (and need the API enabled in) this project.
    "cloudbilling.googleapis.com",
    "iam.googleapis.com",
    # Workload Identity Federation: STS exchanges the GitHub token, IAM Credentials mints the account's token.
    "iamcredentials.googleapis.com",
    "sts.googleapis.com",
    "artifactregistry.googleapis.com",
    "container.googleapis.com",
    "compute.googleapis.com",
)
NODE_ACCOUNT_ID: Final = "gpu-runtime-nodes"
DEPLOY_ACCOUNT_ID: Final = "gpu-runtime-deploy"
PREVIEW_ACCOUNT_ID: Final = "gpu-runtime-preview"
WORKLOAD_POOL_ID: Final = "github"
WORKLOAD_PROVIDER_ID: Final = "github-actions"
GITHUB_ISSUER: Final = "https://token.actions.githubusercontent.com"
# The GitHub environment every pull-request preview runs in (its reviewers approve each run).
PREVIEW_ENVIRONMENT: Final = "preview"
ACT_AS_ROLE: Final = "roles/iam.serviceAccountUser"
REGISTRY_WRITER_ROLE: Final = "roles/artifactregistry.writer"
REGISTRY_READER_ROLE: Final = "roles/artifactregistry.reader"
# Untagged images pile up with every deploy: delete them after 30 days (seconds), but always keep the most
# recent versions, which rollback may need.
UNTAGGED_IMAGE_TTL_S: Final = 30 * 24 * 3600
KEEP_RECENT_IMAGES: Final = 20

PROJECT_IAM_ADMIN_ROLE: Final = "roles/resourcemanager.projectIamAdmin"
# The deploy account's project IAM admin may grant and revoke only the roles the main program grants: an IAM
# condition on role grants (https://cloud.google.com/iam/docs/setting-limits-on-granting-roles). For its other
# permissions (reading the policy) the attribute is empty, and hasOnly of nothing holds.
GRANTS_ATTRIBUTE: Final = "iam.googleapis.com/modifiedGrantsByRole"
GRANTS_CONDITION_TITLE: Final = "only-the-main-programs-roles"


def grants_condition(roles: tuple[str, ...]) -> str:
    """The CEL expression allowing a policy change only when every role it grants or revokes is in ``roles``."""
    return f"api.getAttribute('{GRANTS_ATTRIBUTE}', []).hasOnly([{', '.join(repr(r) for r in roles)}])"


# Project roles of the deploy account, each for the resources of the main program it manages (the proof in
# components/review/ci_proof.py ties every role to a resource type of the rendered stack, and fails on a spare one).
DEPLOY_PROJECT_ROLES: Final = (
    "roles/serviceusage.serviceUsageAdmin",  # the main program's APIs and the Pub/Sub service identity
    "roles/pubsub.admin",  # topics, subscriptions and their IAM members
    "roles/storage.admin",  # the result bucket and its IAM members
    "roles/compute.networkAdmin",  # VPC, subnet, router, NAT
    # The cluster and node pools, and inside the cluster what Helm and server-side apply create: CRDs,
    # ClusterRoles and their bindings (RBAC escalation), Helm's release Secrets. container.developer has no
    # RBAC or CRD rights and container.clusterAdmin no Kubernetes object rights; container.admin has both.
    "roles/container.admin",
    "roles/iam.serviceAccountAdmin",  # the workload accounts and their Workload Identity bindings
    # The project IAM members of the workload and node accounts, and only their roles (grants_condition).
    PROJECT_IAM_ADMIN_ROLE,
    # `gpurt validate` after the deploy: the Vertex AI custom jobs it lists and the quotas it reads.
    "roles/aiplatform.viewer",
    "roles/cloudquotas.viewer",
)
# Project roles of the preview account: read what `pulumi preview` reads. In the cluster it holds only the
# RBAC the main program gives it (components/ci_access.py), never an IAM role that reaches Kubernetes objects.
PREVIEW_PROJECT_ROLES: Final = (
    # container.clusters.get and container.clusters.connect (the DNS endpoint checks the latter) and nothing in
    # the cluster: Kubernetes RBAC decides what the preview may read and dry-run there.
    "roles/container.clusterViewer",
    "roles/iam.serviceAccountViewer",  # the main program reads the nodes' account
)


def account_email(account_id: str, project: str) -> str:
    """The e-mail of a user-managed service account ``account_id`` of ``project``."""
    return f"{account_id}@{project}.iam.gserviceaccount.com"


def github_condition(repository: str, repository_id: str, owner_id: str) -> str:
    """The provider's attribute condition: only tokens GitHub issued to workflows of this very repository.

    GitHub signs every repository's tokens with one issuer, so without a condition any repository could
    exchange its token in this pool (Google: "Workload Identity Federation with deployment pipelines"). The
    condition compares the numeric ``repository_id`` and ``repository_owner_id`` claims, not the names: a
    deleted or renamed repository's name (or its owner's) can be registered by someone else, an id cannot
    (google-github-actions/auth, docs/SECURITY_CONSIDERATIONS.md, "Use GitHub's Numeric, Immutable Values").
    """
    owner, _, name = repository.partition("/")
    if not owner or not name or "/" in name or "'" in repository:
        raise ValueError(f"githubRepository must be OWNER/NAME, not {repository!r}")
    for label, value in (("githubRepositoryId", repository_id), ("githubOwnerId", owner_id)):
        if not value.isdigit():
            raise ValueError(f"{label} must be GitHub's numeric id, not {value!r}")
    return f"assertion.repository_id == '{repository_id}' && assertion.repository_owner_id == '{owner_id}'"


def environment_principal(pool_name: str, repository: str, environment: str) -> str:
    """The principal of jobs of ``repository`` running in GitHub environment ``environment``.

    A job with ``environment:`` gets the subject ``repo:OWNER/NAME:environment:ENV``; binding that subject (not
    the whole repository) means only the job behind that environment's protection rules may act as the account.
    """
    return f"principal://iam.googleapis.com/{pool_name}/subject/repo:{repository}:environment:{environment}"


def image_repository(
    name: str, project: pulumi.Input[str], region: str, repository_id: str, opts: pulumi.ResourceOptions
) -> gcp.artifactregistry.Repository:
    """The Docker repository of the platform's images: immutable tags, untagged images expire, recent ones stay."""
    return gcp.artifactregistry.Repository(
        name,
        project=project,
        location=region,
        repository_id=repository_id,
        format="DOCKER",
        description="gpu-scheduler and Dask GPU worker images",
        labels=dict(contract.GCP_LABELS),
        # A pushed tag can never be moved to other bytes: with the digests in the stack config, nodes pull
        # exactly the image that was built and tested
        # (https://cloud.google.com/artifact-registry/docs/container-concepts, "tags can be immutable").
        docker_config=gcp.artifactregistry.RepositoryDockerConfigArgs(immutable_tags=True),
        cleanup_policies=[
            gcp.artifactregistry.RepositoryCleanupPolicyArgs(
                id="delete-untagged",
                action="DELETE",
                condition=gcp.artifactregistry.RepositoryCleanupPolicyConditionArgs(
                    tag_state="UNTAGGED", older_than=f"{UNTAGGED_IMAGE_TTL_S}s"
                ),
            ),
            gcp.artifactregistry.RepositoryCleanupPolicyArgs(
                id="keep-recent",
                action="KEEP",
                most_recent_versions=gcp.artifactregistry.RepositoryCleanupPolicyMostRecentVersionsArgs(
                    keep_count=KEEP_RECENT_IMAGES
                ),
            ),
        ],
        opts=opts,
    )


@dataclass(frozen=True)
class MainStackTarget:
    """Where a stack of the main program lives: its project, region and image repository."""

    project: str
    region: str
    repository: str


def main_stack_target(stack: str, root: Path) -> MainStackTarget:
    """Read ``root/Pulumi.<stack>.yaml`` of the main program: its provider keys and ``images.repository``."""
    path = root / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise ValueError(f"no {path.name} in {root}: the bootstrap stack must be named after a main stack")
    config = (yaml.safe_load(path.read_text()) or {}).get("config") or {}
    images = config.get("gpu-runtime:images") or {}
    return MainStackTarget(config["gcp:project"], config["gcp:region"], images.get("repository", "gpu-runtime"))


@dataclass
class BootstrapArgs:
    """Inputs of the bootstrap component."""

    project: str
    """GCP project id of the stack."""

    region: str
    """Region of the image repository (the stack's ``gcp:region``)."""

    repository: str
    """Artifact Registry repository id (the stack's ``images.repository``)."""

    github_repository: str
    """``OWNER/NAME`` of the GitHub repository whose workflows deploy and preview this stack."""

    github_repository_id: str
    """That repository's numeric id (``gh api repos/OWNER/NAME --jq .id``): what the federation admits."""

    github_owner_id: str
    """Its owner's numeric id (``gh api repos/OWNER/NAME --jq .owner.id``)."""

    deploy_environment: str
    """The GitHub environment the deploy job of this stack runs in (the workflow names it after the stack)."""

    preview_environment: str = PREVIEW_ENVIRONMENT
    """The GitHub environment of the pull-request preview."""

    apis: tuple[str, ...] = field(default=BASE_APIS)
    """APIs enabled before anything else."""


class Bootstrap(pulumi.ComponentResource):
    """APIs, the image repository, the nodes' account, the CI accounts with their roles, and CI's federation."""

    def __init__(self, name: str, args: BootstrapArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-runtime:bootstrap:Bootstrap", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.apis = [
            # Never disabled on destroy: the main stack and other workloads of the project use them too.
            gcp.projects.Service(
                f"{name}-{api.split('.')[0]}", project=args.project, service=api, disable_on_destroy=False, opts=child
            )
            for api in args.apis
        ]
        after_apis = pulumi.ResourceOptions(parent=self, depends_on=self.apis)
        self.registry = image_repository(f"{name}-registry", args.project, args.region, args.repository, after_apis)

        def account(account_id: str, display_name: str) -> gcp.serviceaccount.Account:
            return gcp.serviceaccount.Account(f"{name}-{account_id}", account_id=account_id, project=args.project,
                                              display_name=display_name, opts=after_apis)

        self.node_account = account(NODE_ACCOUNT_ID, "GKE nodes of the GPU runtime (logs, metrics, image pulls)")
        self.deploy_account = account(DEPLOY_ACCOUNT_ID, "CI: pulumi up of the GPU runtime, image pushes, validation")
        self.preview_account = account(PREVIEW_ACCOUNT_ID, "CI: pulumi preview of pull requests")
        deploy, preview = self.deploy_account.member, self.preview_account.member
        for account_id, member, roles in ((DEPLOY_ACCOUNT_ID, deploy, DEPLOY_PROJECT_ROLES),
                                          (PREVIEW_ACCOUNT_ID, preview, PREVIEW_PROJECT_ROLES)):
            for role in roles:
                limited = account_id == DEPLOY_ACCOUNT_ID and role == PROJECT_IAM_ADMIN_ROLE
                gcp.projects.IAMMember(
                    f"{name}-{account_id}-{role_suffix(role)}",
                    project=args.project,
                    role=role,
                    member=member,
                    condition=gcp.projects.IAMMemberConditionArgs(
                        title=GRANTS_CONDITION_TITLE,
                        description="grant and revoke only the roles the main program grants (components/iam.py)",
                        expression=grants_condition(granted_project_roles()),
                    ) if limited else None,
                    opts=after_apis,
                )
        # Pushing is the only write the deploy needs on the registry, and on this repository only; the preview
        # reads it (the main program looks it up).
        for account, role, member in (
            (DEPLOY_ACCOUNT_ID, REGISTRY_WRITER_ROLE, deploy),
            (PREVIEW_ACCOUNT_ID, REGISTRY_READER_ROLE, preview),
        ):
            gcp.artifactregistry.RepositoryIamMember(
                f"{name}-{account}-{role_suffix(role)}-on-registry",
                project=args.project,
                location=args.region,
                repository=self.registry.repository_id,
                role=role,
                member=member,
                opts=after_apis,
            )
        # Node pools run as the nodes' account: whoever creates them must be able to act as it, and as no other.
        gcp.serviceaccount.IAMMember(
            f"{name}-{DEPLOY_ACCOUNT_ID}-act-as-{NODE_ACCOUNT_ID}",
            service_account_id=self.node_account.name,
            role=ACT_AS_ROLE,
            member=deploy,
            opts=after_apis,
        )

        self.pool = gcp.iam.WorkloadIdentityPool(
            f"{name}-pool",
            project=args.project,
            workload_identity_pool_id=WORKLOAD_POOL_ID,
            display_name="GitHub Actions",
            description=f"CI of {args.github_repository}",
            opts=after_apis,
        )
        self.provider = gcp.iam.WorkloadIdentityPoolProvider(
            f"{name}-provider",
            project=args.project,
            workload_identity_pool_id=self.pool.workload_identity_pool_id,
            workload_identity_pool_provider_id=WORKLOAD_PROVIDER_ID,
            display_name="GitHub OIDC",
            attribute_mapping={
                "google.subject": "assertion.sub",
                "attribute.repository": "assertion.repository",
                "attribute.repository_id": "assertion.repository_id",
                "attribute.repository_owner_id": "assertion.repository_owner_id",
                "attribute.environment": "assertion.environment",
            },
            attribute_condition=github_condition(
                args.github_repository, args.github_repository_id, args.github_owner_id),
            oidc=gcp.iam.WorkloadIdentityPoolProviderOidcArgs(issuer_uri=GITHUB_ISSUER),
            opts=after_apis,
        )
        for account, environment in (
            (self.deploy_account, args.deploy_environment),
            (self.preview_account, args.preview_environment),
        ):
            gcp.serviceaccount.IAMMember(
                f"{name}-{environment}-workload-identity",
                service_account_id=account.name,
                role=WORKLOAD_IDENTITY_ROLE,
                member=self.pool.name.apply(
                    lambda pool, environment=environment: environment_principal(
                        pool, args.github_repository, environment
                    )
                ),
                opts=after_apis,
            )
        self.registry_url = pulumi.Output.concat(
            args.region, "-docker.pkg.dev/", args.project, "/", self.registry.repository_id
        )
        self.register_outputs(
            {
                "registry_url": self.registry_url,
                "workload_identity_provider": self.provider.name,
                "deploy_service_account": self.deploy_account.email,
                "preview_service_account": self.preview_account.email,
            }
        )
