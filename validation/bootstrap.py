"""``gpurt bootstrap``: the ordered, idempotent steps from an empty project to a stack ready for its first deploy.

1. Enable Service Usage, Cloud Resource Manager and Cloud Billing with gcloud (the bootstrap program's provider
   enables APIs through the first and changes IAM through the second, so it cannot enable them itself), and
   stop unless the project is linked to a billing account (the APIs of step 2 refuse a project without one).
2. ``pulumi up`` the bootstrap program (``bootstrap/``) for the stack: APIs, the image repository, the nodes'
   account, the deploy and preview accounts with their roles, CI's Workload Identity Federation.
3. Create the main stack (``pulumi stack select --create``) and give it a control token as a Pulumi secret,
   only if it has none (a second run must not rotate a deployed token).
4. Pin the Dask operator's image: the digest its registry serves for the locked version's tag, written into
   the stack's ``images.operatorDigest`` once (a later tag move is not followed; an operator upgrade sets it
   again with ``gpurt images digest``).
5. The policy gate the pull request cannot forge: publish this checkout's policy pack to Pulumi Cloud, make a
   policy group holding the stack, and enable the pack there, so Pulumi Cloud runs it on every preview and
   update of the stack whatever the program or the command line says.

Every step first reads what exists and changes only what is missing, so a second run changes nothing. The
cloud, Pulumi and the image registry are reached only through the seams below (``validation/adapters/bootstrap.py``
holds the real ones); the tests run the steps against recording fakes.
"""

from __future__ import annotations

import json
import secrets
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from components.bootstrap import BASE_APIS, main_stack_target
from components.policy.bundle import bundle_version, write_bundle
from components.policy.pack import PACK_NAME
from components.review.quotas import COMPUTE, QuotaNeed
from runtime.manifests.helm_values import operator_image_reference

# Enabled by gcloud before the bootstrap program runs (see step 1); none of them needs billing.
FIRST_APIS: Final = BASE_APIS[:3]
# What the deploy runs besides this package, each with how to install it (docs/infrastructure.md, step 1).
# kubectl's and the Kubernetes client's access to GKE goes through gke-gcloud-auth-plugin since GKE 1.26
# (https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl#install_plugin).
DEPLOY_TOOLS: Final = {
    "gcloud": "install the gcloud CLI (https://cloud.google.com/sdk/docs/install)",
    "gke-gcloud-auth-plugin": "gcloud components install gke-gcloud-auth-plugin",
    "pulumi": "install the Pulumi CLI at PULUMI_VERSION of .github/workflows/deploy.yml (get.pulumi.com)",
}
BOOTSTRAP_DIR: Final = "bootstrap"
MAIN_PROJECT: Final = "gpu-runtime"
CONTROL_TOKEN_KEY: Final = "gpu-runtime:controlToken"
IMAGES_KEY: Final = "gpu-runtime:images"
OPERATOR_DIGEST: Final = "operatorDigest"
GITHUB_REPOSITORY_KEY: Final = "gpu-runtime-bootstrap:githubRepository"
GITHUB_REPOSITORY_ID_KEY: Final = "gpu-runtime-bootstrap:githubRepositoryId"
GITHUB_OWNER_ID_KEY: Final = "gpu-runtime-bootstrap:githubOwnerId"
POLICY_GROUP: Final = "gpu-runtime"
# 32 random bytes, hex: what `openssl rand -hex 32` gives, as the docs suggest for a hand-set token.
TOKEN_BYTES: Final = 32


class BootstrapError(RuntimeError):
    """A step cannot go on; the message says what to do."""


class CloudSetup(Protocol):
    """What the bootstrap asks of Google Cloud directly (gcloud)."""

    def enabled_services(self, project: str) -> set[str]:
        """The APIs enabled in ``project``."""
        ...

    def enable_services(self, project: str, services: Sequence[str]) -> None:
        """Enable ``services`` in ``project``."""
        ...

    def repository_exists(self, project: str, region: str, repository: str) -> bool:
        """Whether the Artifact Registry repository exists (raises when that cannot be told)."""
        ...

    def billing_enabled(self, project: str) -> bool:
        """Whether ``project`` is linked to an open Cloud Billing account."""
        ...

    def compute_quota_limits(self, project: str, region: str) -> dict[tuple[str, str], float]:
        """Compute Engine quota limits by (scope, metric), scope the region or ``global``."""
        ...


class Stacks(Protocol):
    """The Pulumi stacks of the programs in this checkout (the Pulumi CLI)."""

    def qualified(self, work_dir: Path, stack: str) -> str:
        """``ORG/PROJECT/STACK``: the one name every command uses for ``stack`` of the program in ``work_dir``."""
        ...

    def exists(self, work_dir: Path, stack: str) -> bool:
        """Whether ``stack`` of the program in ``work_dir`` exists in the backend, in the stacks' organization."""
        ...

    def create(self, work_dir: Path, stack: str) -> None:
        """``pulumi stack select --create``."""
        ...

    def config_keys(self, work_dir: Path, stack: str) -> dict[str, str | None]:
        """The stack's config: key -> value, secrets as None (never read back)."""
        ...

    def set_config(self, work_dir: Path, stack: str, key: str, value: str, secret: bool, path: bool = False) -> None:
        """``pulumi config set [--secret] [--path]`` (a secret never on the command line); ``path``: ``key`` is
        ``namespace:object.field``, one field of an object value."""
        ...

    def up(self, work_dir: Path, stack: str) -> int:
        """``pulumi up --yes``; returns how many resources it created, updated, replaced or deleted."""
        ...

    def outputs(self, work_dir: Path, stack: str) -> dict[str, str]:
        """The stack's outputs."""
        ...


class ImageDigests(Protocol):
    """The digests container registries serve for image tags."""

    def digest(self, reference: str) -> str:
        """The ``sha256:…`` digest served for ``reference`` (``host/name:tag``) now."""
        ...


@dataclass(frozen=True)
class PolicyGroup:
    """A Pulumi Cloud policy group: its stacks as (project, stack) and its packs as (name, version tag)."""

    stacks: frozenset[tuple[str, str]] = frozenset()
    packs: frozenset[tuple[str, str]] = frozenset()


class PolicyService(Protocol):
    """Pulumi Cloud's policy packs and policy groups (server-side enforcement)."""

    def published(self, org: str, pack: str) -> set[str]:
        """Version tags of ``pack`` published in ``org``."""
        ...

    def publish(self, org: str, bundle: Path) -> None:
        """``pulumi policy publish`` the pack directory ``bundle``."""
        ...

    def group(self, org: str, name: str) -> PolicyGroup | None:
        """The policy group, or None when it does not exist."""
        ...

    def create_group(self, org: str, name: str) -> None:
        """Create an empty preventative policy group for stacks."""
        ...

    def add_stack(self, org: str, group: str, project: str, stack: str) -> None:
        """Add a stack to the group."""
        ...

    def enable(self, org: str, group: str, pack: str, version: str) -> None:
        """Enforce ``pack`` at ``version`` on the group's stacks."""
        ...


@dataclass(frozen=True)
class Step:
    """One step of the bootstrap: what it is about, whether it changed anything, and what it found or did."""

    name: str
    changed: bool
    detail: str


@dataclass
class Report:
    """The steps in the order they ran, and the bootstrap stack's outputs (what the workflows need)."""

    steps: list[Step] = field(default_factory=list)
    outputs: Mapping[str, str] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        """Whether any step changed anything."""
        return any(step.changed for step in self.steps)


@dataclass(frozen=True)
class Target:
    """The stack to bootstrap and where its two programs are."""

    stack: str
    root: Path
    github_repository: str
    pulumi_org: str
    # GitHub's numeric ids of the repository and its owner: the federation admits tokens by these, not names.
    github_ids: tuple[str, str]

    @property
    def bootstrap_dir(self) -> Path:
        """The bootstrap program's folder."""
        return self.root / BOOTSTRAP_DIR


def bootstrap(
    target: Target,
    cloud: CloudSetup,
    stacks: Stacks,
    policies: PolicyService,
    images: ImageDigests,
    bundle_dir: Path,
    new_token: Callable[[], str] = lambda: secrets.token_hex(TOKEN_BYTES),
) -> Report:
    """Run the steps for ``target``; each changes only what is missing."""
    project = main_stack_target(target.stack, target.root).project
    report = Report()
    enabled = cloud.enabled_services(project)
    missing = [api for api in FIRST_APIS if api not in enabled]
    if missing:
        cloud.enable_services(project, missing)
    report.steps.append(
        Step(
            "base APIs",
            bool(missing),
            f"enabled {', '.join(missing)}" if missing else "Service Usage, Cloud Resource Manager and Cloud Billing "
            "already enabled",
        )
    )
    # Compute Engine, GKE and Artifact Registry, which the bootstrap program enables next, refuse a project
    # without billing (https://cloud.google.com/billing/docs/how-to/modify-project).
    if not cloud.billing_enabled(project):
        raise BootstrapError(billing_missing(project))
    report.steps.append(Step("billing", False, f"{project} is linked to a billing account"))

    report.steps.append(_ensure_stack(stacks, target.bootstrap_dir, target.stack, "bootstrap stack"))
    config = stacks.config_keys(target.bootstrap_dir, target.stack)
    wanted = {GITHUB_REPOSITORY_KEY: target.github_repository, GITHUB_REPOSITORY_ID_KEY: target.github_ids[0],
              GITHUB_OWNER_ID_KEY: target.github_ids[1]}
    wrong = {key: value for key, value in wanted.items() if config.get(key) != value}
    for key, value in wrong.items():
        stacks.set_config(target.bootstrap_dir, target.stack, key, value, secret=False)
    report.steps.append(Step("bootstrap config", bool(wrong), f"githubRepository {target.github_repository} "
                             f"(repository id {target.github_ids[0]}, owner id {target.github_ids[1]})"))
    changes = stacks.up(target.bootstrap_dir, target.stack)
    report.steps.append(Step("bootstrap resources", changes > 0, f"pulumi up: {changes} resources changed"))
    report.outputs = stacks.outputs(target.bootstrap_dir, target.stack)

    report.steps.append(_ensure_stack(stacks, target.root, target.stack, "main stack"))
    has_token = CONTROL_TOKEN_KEY in stacks.config_keys(target.root, target.stack)
    if not has_token:
        stacks.set_config(target.root, target.stack, CONTROL_TOKEN_KEY, new_token(), secret=True)
    report.steps.append(
        Step(
            "control token",
            not has_token,
            "already set (kept)" if has_token else f"set as a secret in Pulumi.{target.stack}.yaml: commit it",
        )
    )
    report.steps.append(_pin_operator_image(target, stacks, images))
    report.steps += _policy_gate(target, policies, bundle_dir)
    return report


def operator_digest(stacks: Stacks, root: Path, stack: str) -> str | None:
    """The main stack's ``images.operatorDigest``, or None."""
    images = stacks.config_keys(root, stack).get(IMAGES_KEY)
    try:
        value = json.loads(images) if images else {}
    except json.JSONDecodeError:
        return None
    return value.get(OPERATOR_DIGEST) if isinstance(value, dict) else None


def _pin_operator_image(target: Target, stacks: Stacks, images: ImageDigests) -> Step:
    pinned = operator_digest(stacks, target.root, target.stack)
    if pinned:
        return Step("operator image", False, f"pinned at {pinned} (kept)")
    reference = operator_image_reference()
    digest = images.digest(reference)
    stacks.set_config(target.root, target.stack, f"{IMAGES_KEY}.{OPERATOR_DIGEST}", digest, secret=False, path=True)
    return Step("operator image", True, f"{reference} pinned at {digest} in Pulumi.{target.stack}.yaml: commit it")


def _ensure_stack(stacks: Stacks, work_dir: Path, stack: str, what: str) -> Step:
    name = stacks.qualified(work_dir, stack)
    if stacks.exists(work_dir, stack):
        return Step(what, False, f"{name} exists")
    stacks.create(work_dir, stack)
    return Step(what, True, f"created {name} (pulumi stack select --create)")


def _policy_gate(target: Target, policies: PolicyService, bundle_dir: Path) -> list[Step]:
    """Publish this checkout's pack (once per version), and enforce it on the stack through a policy group."""
    org, steps = target.pulumi_org, []
    bundle = write_bundle(bundle_dir)
    version = bundle_version(bundle)
    new = version not in policies.published(org, PACK_NAME)
    if new:
        policies.publish(org, bundle)
    steps.append(Step("policy pack", new, f"{PACK_NAME} {version} {'published' if new else 'already published'}"))
    group = policies.group(org, POLICY_GROUP)
    created = group is None
    if group is None:
        policies.create_group(org, POLICY_GROUP)
        group = PolicyGroup()
    steps.append(Step("policy group", created, f"{org}/{POLICY_GROUP} {'created' if created else 'exists'}"))
    add = (MAIN_PROJECT, target.stack) not in group.stacks
    if add:
        policies.add_stack(org, POLICY_GROUP, MAIN_PROJECT, target.stack)
    steps.append(Step("policy group stack", add, f"{MAIN_PROJECT}/{target.stack}"))
    enable = (PACK_NAME, version) not in group.packs
    if enable:
        policies.enable(org, POLICY_GROUP, PACK_NAME, version)
    steps.append(Step("policy enforced", enable, f"{PACK_NAME} {version} on {POLICY_GROUP}"))
    return steps


def billing_missing(project: str) -> str:
    """What to do about ``project`` having no billing account."""
    return (f"billing is not enabled on {project}: link it to a billing account first "
            f"(`gcloud billing accounts list`, then `gcloud billing projects link {project} "
            "--billing-account=ACCOUNT_ID`)")


@dataclass(frozen=True)
class Readiness:
    """What ``check`` found: ``missing`` stops a deploy; ``short`` (a quota below the stack's need at its maxima)
    does not, since the platform works up to the quota, but says which quota to request."""

    missing: list[str] = field(default_factory=list)
    short: list[str] = field(default_factory=list)


def check(stack: str, root: Path, cloud: CloudSetup, stacks: Stacks, needs: Sequence[QuotaNeed] = (),
          which: Callable[[str], str | None] = shutil.which) -> Readiness:
    """What the deploy needs from the bootstrap and is missing (read-only; the deploy workflow runs it first):
    the tools, the base APIs, billing, the registry, the stack with its token and operator digest, and the Compute
    Engine quotas of ``needs`` (the stack's, from ``gpurt plan``). Vertex AI's quota is read by ``gpurt validate``
    after the first deploy, which enables the Cloud Quotas API it is read through."""
    where = main_stack_target(stack, root)
    problems = [f"{tool} is not on PATH: {how}" for tool, how in DEPLOY_TOOLS.items() if which(tool) is None]
    enabled = cloud.enabled_services(where.project)
    problems += [f"API {api} is not enabled in {where.project}" for api in FIRST_APIS if api not in enabled]
    if all(api in enabled for api in FIRST_APIS) and not cloud.billing_enabled(where.project):
        problems.append(billing_missing(where.project))
    if not cloud.repository_exists(where.project, where.region, where.repository):
        problems.append(f"Artifact Registry repository {where.repository} does not exist in {where.region}")
    if not stacks.exists(root, stack):
        # a stack of the same name in another organization (the caller's default one) is not this stack
        problems.append(f"stack {stacks.qualified(root, stack)} does not exist")
    else:
        if CONTROL_TOKEN_KEY not in stacks.config_keys(root, stack):
            problems.append(f"stack {stack} has no {CONTROL_TOKEN_KEY}")
        if not operator_digest(stacks, root, stack):
            problems.append(f"stack {stack} has no {IMAGES_KEY}.{OPERATOR_DIGEST} (the Dask operator's image digest)")
    compute = [n for n in needs if n.service == COMPUTE]
    if not compute or problems:  # quotas are read once the bootstrap's work is there (it enables Compute Engine)
        return Readiness(problems)
    limits = cloud.compute_quota_limits(where.project, where.region)
    short = []
    for need in compute:
        limit = limits.get((need.scope, need.metric), 0.0)
        if limit < need.minimum:  # the pools cannot even be created at their least nodes
            problems.append(f"{_quota(need, limit)}, below the {need.minimum} its pools start with: "
                            f"`{need.request_command(where.project)}`")
        elif limit < need.amount:
            short.append(f"{_quota(need, limit)}: `{need.request_command(where.project)}`")
    return Readiness(problems, short)


def _quota(need: QuotaNeed, limit: float) -> str:
    return f"quota {need.metric} ({need.scope}) is {limit:g} {need.unit}, the stack needs {need.amount}"
