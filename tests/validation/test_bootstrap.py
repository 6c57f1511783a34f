"""`gpurt bootstrap`'s steps at their seams: in order, each changing only what is missing, twice a no-op."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from components.policy.bundle import write_bundle
from components.policy.pack import PACK_NAME
from components.review.quotas import QuotaNeed
from runtime.manifests.helm_values import operator_image_reference
from validation.bootstrap import (
    CONTROL_TOKEN_KEY,
    GITHUB_OWNER_ID_KEY,
    GITHUB_REPOSITORY_ID_KEY,
    GITHUB_REPOSITORY_KEY,
    IMAGES_KEY,
    MAIN_PROJECT,
    POLICY_GROUP,
    BootstrapError,
    PolicyGroup,
    Readiness,
    Target,
    bootstrap,
    check,
    operator_digest,
)

ROOT = Path(__file__).resolve().parents[2]
PROJECT = yaml.safe_load((ROOT / "Pulumi.staging.yaml").read_text())["config"]["gcp:project"]


@dataclass
class World:
    """What the fakes hold: the cloud, the Pulumi backend and Pulumi Cloud, and every change made to them."""

    services: set[str] = field(default_factory=set)
    repositories: set[str] = field(default_factory=set)
    billing: bool = True
    quota_limits: dict[tuple[str, str], float] = field(default_factory=dict)
    stacks: dict[tuple[str, str], dict[str, str | None]] = field(default_factory=dict)
    deployed: set[tuple[str, str]] = field(default_factory=set)
    published: set[str] = field(default_factory=set)
    groups: dict[str, PolicyGroup] = field(default_factory=dict)
    changes: list[str] = field(default_factory=list)
    # what the registry serves for each tag now
    tags: dict[str, str] = field(default_factory=lambda: {operator_image_reference(): "sha256:" + "ab" * 32})


class FakeRegistry:
    def __init__(self, world: World) -> None:
        self.w = world

    def digest(self, reference: str) -> str:
        return self.w.tags[reference]


class FakeCloud:
    def __init__(self, world: World) -> None:
        self.w = world

    def enabled_services(self, project: str) -> set[str]:
        return set(self.w.services)

    def enable_services(self, project: str, services: Sequence[str]) -> None:
        self.w.changes.append(f"enable {' '.join(services)}")
        self.w.services |= set(services)

    def repository_exists(self, project: str, region: str, repository: str) -> bool:
        return repository in self.w.repositories

    def billing_enabled(self, project: str) -> bool:
        return self.w.billing

    def compute_quota_limits(self, project: str, region: str) -> dict[tuple[str, str], float]:
        return dict(self.w.quota_limits)


class FakeStacks:
    def __init__(self, world: World) -> None:
        self.w = world

    def qualified(self, work_dir: Path, stack: str) -> str:
        return f"impulse/{work_dir.name}/{stack}"

    def exists(self, work_dir: Path, stack: str) -> bool:
        return (work_dir.name, stack) in self.w.stacks

    def create(self, work_dir: Path, stack: str) -> None:
        self.w.changes.append(f"create {work_dir.name}/{stack}")
        self.w.stacks[(work_dir.name, stack)] = {}

    def config_keys(self, work_dir: Path, stack: str) -> dict[str, str | None]:
        return dict(self.w.stacks[(work_dir.name, stack)])

    def set_config(self, work_dir: Path, stack: str, key: str, value: str, secret: bool, path: bool = False) -> None:
        self.w.changes.append(f"config {work_dir.name}/{stack} {key}{' (secret)' if secret else ''}")
        config = self.w.stacks[(work_dir.name, stack)]
        if path:  # namespace:object.field, as `pulumi config --json` then shows the object: a JSON string
            top, _, inner = key.partition(".")
            config[top] = json.dumps({**json.loads(config.get(top) or "{}"), inner: value})
        else:
            config[key] = None if secret else value

    def up(self, work_dir: Path, stack: str) -> int:
        assert {"serviceusage.googleapis.com", "cloudresourcemanager.googleapis.com"} <= self.w.services
        assert GITHUB_REPOSITORY_KEY in self.w.stacks[(work_dir.name, stack)]
        if (work_dir.name, stack) in self.w.deployed:
            return 0  # Pulumi's own idempotence: nothing differs from the state
        self.w.changes.append(f"up {work_dir.name}/{stack}")
        self.w.deployed.add((work_dir.name, stack))
        self.w.repositories.add("gpu-runtime")
        return 31

    def outputs(self, work_dir: Path, stack: str) -> dict[str, str]:
        return {"deploy_service_account": f"gpu-runtime-deploy@{PROJECT}.iam.gserviceaccount.com"}


class FakePolicies:
    def __init__(self, world: World) -> None:
        self.w = world

    def published(self, org: str, pack: str) -> set[str]:
        return set(self.w.published)

    def publish(self, org: str, bundle: Path) -> None:
        assert (bundle / "PulumiPolicy.yaml").is_file()
        version = yaml.safe_load((bundle / "PulumiPolicy.yaml").read_text())["version"]
        self.w.changes.append(f"publish {version}")
        self.w.published.add(version)

    def group(self, org: str, name: str) -> PolicyGroup | None:
        return self.w.groups.get(name)

    def create_group(self, org: str, name: str) -> None:
        self.w.changes.append(f"group {name}")
        self.w.groups[name] = PolicyGroup()

    def add_stack(self, org: str, group: str, project: str, stack: str) -> None:
        self.w.changes.append(f"add {project}/{stack}")
        g = self.w.groups[group]
        self.w.groups[group] = PolicyGroup(g.stacks | {(project, stack)}, g.packs)

    def enable(self, org: str, group: str, pack: str, version: str) -> None:
        assert version in self.w.published
        self.w.changes.append(f"enable {pack} {version}")
        g = self.w.groups[group]
        self.w.groups[group] = PolicyGroup(g.stacks, g.packs | {(pack, version)})


def _run(world: World, tmp_path: Path, tokens: list[str]) -> list[str]:
    before = len(world.changes)
    target = Target("staging", ROOT, "impulse-risk/gpu-runtime", "impulse", ("812345678", "98765"))
    report = bootstrap(
        target,
        FakeCloud(world),
        FakeStacks(world),
        FakePolicies(world),
        FakeRegistry(world),
        tmp_path / "pack",
        new_token=lambda: tokens.pop(),
    )
    assert report.changed == (len(world.changes) > before)
    return world.changes[before:]


def test_an_empty_project_is_bootstrapped_in_order(tmp_path: Path) -> None:
    world = World()
    changes = _run(world, tmp_path, ["first-token"])
    version = next(c for c in changes if c.startswith("publish ")).split()[1]
    assert changes == [
        "enable serviceusage.googleapis.com cloudresourcemanager.googleapis.com cloudbilling.googleapis.com",
        "create bootstrap/staging",
        f"config bootstrap/staging {GITHUB_REPOSITORY_KEY}",
        f"config bootstrap/staging {GITHUB_REPOSITORY_ID_KEY}",
        f"config bootstrap/staging {GITHUB_OWNER_ID_KEY}",
        "up bootstrap/staging",
        f"create {ROOT.name}/staging",
        f"config {ROOT.name}/staging {CONTROL_TOKEN_KEY} (secret)",
        f"config {ROOT.name}/staging {IMAGES_KEY}.operatorDigest",
        f"publish {version}",
        f"group {POLICY_GROUP}",
        f"add {MAIN_PROJECT}/staging",
        f"enable {PACK_NAME} {version}",
    ]
    assert version.startswith("0.1.0-g")  # one version per pack content


def test_a_second_run_changes_nothing_and_keeps_the_token(tmp_path: Path) -> None:
    world = World()
    _run(world, tmp_path, ["first-token"])
    tokens = ["would-rotate"]

    world.tags[operator_image_reference()] = "sha256:" + "cd" * 32  # the tag moved upstream
    assert _run(world, tmp_path, tokens) == []
    assert tokens == ["would-rotate"]  # a deployed token is never replaced
    # the pinned digest stays: a moved tag is not followed without a review
    assert json.loads(world.stacks[(ROOT.name, "staging")][IMAGES_KEY])["operatorDigest"] == "sha256:" + "ab" * 32


def test_a_changed_pack_is_published_and_enforced_again(tmp_path: Path) -> None:
    world = World()
    _run(world, tmp_path, ["t"])
    world.published = {"0.1.0-gold"}
    world.groups[POLICY_GROUP] = PolicyGroup(world.groups[POLICY_GROUP].stacks, frozenset({(PACK_NAME, "0.1.0-gold")}))

    changes = _run(world, tmp_path, [])
    assert [c.split()[0] for c in changes] == ["publish", "enable"]


def _check(world: World, needs: Sequence[QuotaNeed] = (), which=lambda tool: f"/usr/bin/{tool}") -> Readiness:
    return check("staging", ROOT, FakeCloud(world), FakeStacks(world), needs, which)


def test_the_deploy_check_names_every_missing_prerequisite_and_then_passes(tmp_path: Path) -> None:
    world = World()
    assert _check(world).missing == [
        f"API serviceusage.googleapis.com is not enabled in {PROJECT}",
        f"API cloudresourcemanager.googleapis.com is not enabled in {PROJECT}",
        f"API cloudbilling.googleapis.com is not enabled in {PROJECT}",
        "Artifact Registry repository gpu-runtime does not exist in us-central1",
        f"stack impulse/{ROOT.name}/staging does not exist",
    ]
    world.stacks[(ROOT.name, "staging")] = {CONTROL_TOKEN_KEY: None}  # made by hand, without the digest
    assert _check(world).missing[-1] == (
        f"stack staging has no {IMAGES_KEY}.operatorDigest (the Dask operator's image digest)")
    world.stacks.clear()
    _run(world, tmp_path, ["t"])
    assert _check(world) == Readiness([], [])
    assert world.changes == _run(World(), tmp_path, ["t"])  # the check itself changed nothing


def test_the_deploy_check_names_a_missing_tool_and_how_to_install_it(tmp_path: Path) -> None:
    """issue #42: the deploy's Kubernetes access needs gke-gcloud-auth-plugin besides gcloud and pulumi."""
    world = World()
    _run(world, tmp_path, ["t"])
    missing = _check(world, which=lambda tool: None if tool == "gke-gcloud-auth-plugin" else f"/bin/{tool}").missing
    assert missing == ["gke-gcloud-auth-plugin is not on PATH: gcloud components install gke-gcloud-auth-plugin"]


def test_a_project_without_billing_stops_the_bootstrap_and_fails_the_check(tmp_path: Path) -> None:
    """issue #42: compute, container and artifactregistry refuse a project without billing, so the bootstrap
    stops right after the base APIs (which need none), naming the command that links one."""
    world = World(billing=False)
    with pytest.raises(BootstrapError, match=rf"gcloud billing projects link {PROJECT} --billing-account="):
        _run(world, tmp_path, ["t"])
    assert world.changes == [
        "enable serviceusage.googleapis.com cloudresourcemanager.googleapis.com cloudbilling.googleapis.com"]
    assert any(p.startswith(f"billing is not enabled on {PROJECT}") for p in _check(world).missing)


def test_quotas_below_the_stacks_need_are_no_capacity_and_below_its_start_missing(tmp_path: Path) -> None:
    world = World()
    _run(world, tmp_path, ["t"])
    needs = (QuotaNeed("GPUS_ALL_REGIONS", "global", 4, 0, "GPUs", ("gpu-t4-spot",)),
             QuotaNeed("CPUS", "us-central1", 40, 4, "vCPUs", ("system", "gpu-t4-spot")),
             QuotaNeed("SSD_TOTAL_GB", "us-central1", 500, 50, "GB", ("system", "gpu-t4-spot")))
    world.quota_limits = {("global", "GPUS_ALL_REGIONS"): 0, ("us-central1", "CPUS"): 2,
                          ("us-central1", "SSD_TOTAL_GB"): 500}
    readiness = _check(world, needs)

    assert readiness.short == [
        "quota GPUS_ALL_REGIONS (global) is 0 GPUs, the stack needs 4: `gcloud quotas preferences create "
        f"--project={PROJECT} --service=compute.googleapis.com --quota-id=GPUS-ALL-REGIONS-per-project "
        "--preferred-value=4`"]
    assert readiness.missing == [
        "quota CPUS (us-central1) is 2 vCPUs, the stack needs 40, below the 4 its pools start with: `gcloud quotas "
        f"preferences create --project={PROJECT} --service=compute.googleapis.com --quota-id=CPUS-per-project-region "
        "--preferred-value=40 --dimensions=region=us-central1`"]


def test_a_bootstrap_stack_must_be_named_after_a_main_stack(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"Pulumi\.qa\.yaml"):
        check("qa", ROOT, FakeCloud(World()), FakeStacks(World()))


# --- the adapters over recorded answers of the CLIs and Pulumi Cloud ---------------------------------------


class Recorded:
    """A command runner answering from a table, recording each command with its working folder and stdin."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.calls: list[tuple[list[str], Path | None, str | None]] = []

    def __call__(self, args: Sequence[str], cwd: Path | None, stdin: str | None) -> str:
        self.calls.append((list(args), cwd, stdin))
        return next((out for prefix, out in self.answers.items() if " ".join(args).startswith(prefix)), "")


def test_the_pulumi_adapter_never_puts_or_reads_a_secret_on_the_command_line(tmp_path: Path) -> None:
    from validation.adapters.bootstrap import PulumiCliStacks

    run = Recorded(
        {
            "pulumi config --json": '{"gpu-runtime:controlToken": {"secret": true}, "gcp:project": '
            '{"value": "p", "secret": false}}',
            "pulumi stack ls": '[{"name": "impulse/staging"}]',
        }
    )
    (tmp_path / "Pulumi.yaml").write_text("name: gpu-runtime\nruntime: python\n")
    stacks = PulumiCliStacks("impulse", run)
    stacks.set_config(tmp_path, "staging", CONTROL_TOKEN_KEY, "s3cret", secret=True)

    assert stacks.config_keys(tmp_path, "staging") == {CONTROL_TOKEN_KEY: None, "gcp:project": "p"}
    assert stacks.exists(tmp_path, "staging") and not stacks.exists(tmp_path, "production")
    args, cwd, stdin = run.calls[0]
    assert "s3cret" not in args and stdin == "s3cret" and "--secret" in args and cwd == tmp_path
    assert all("--show-secrets" not in call[0] for call in run.calls)
    # An object's field is set with --path, and read back from the object `pulumi config --json` shows as JSON.
    stacks.set_config(tmp_path, "staging", f"{IMAGES_KEY}.operatorDigest", "sha256:" + "ab" * 32, secret=False,
                      path=True)
    assert run.calls[-1][0][:5] == ["pulumi", "config", "set", "--path", f"{IMAGES_KEY}.operatorDigest"]
    digest = "sha256:" + "ab" * 32
    run.answers["pulumi config --json"] = json.dumps({IMAGES_KEY: {
        "value": json.dumps({"repository": "gpu-runtime", "operatorDigest": digest}),
        "objectValue": {"repository": "gpu-runtime", "operatorDigest": digest}, "secret": False}})
    assert operator_digest(stacks, tmp_path, "staging") == digest
    # A new stack is made in the organization whose policy group enforces the pack.
    stacks.create(tmp_path, "production")
    assert run.calls[-1][0][:5] == ["pulumi", "stack", "select", "--create", "impulse/gpu-runtime/production"]


@dataclass
class Response:
    status_code: int
    body: dict | None = None

    @property
    def content(self) -> bytes:
        return b"{}" if self.body is not None else b""

    def json(self) -> dict:
        return self.body or {}

    def raise_for_status(self) -> None:
        assert self.status_code < 400


class FakePulumiCloud:
    """Pulumi Cloud's REST API for policy groups, as ``request``: it refuses what the service refuses.

    "The Pulumi Cloud REST API will return a 401 status code if the token is missing or invalid"
    (https://www.pulumi.com/docs/reference/cloud-rest-api/api-basics/): every request needs
    ``Authorization: token <a token it issued>``.
    """

    def __init__(self, token: str) -> None:
        self.token = token
        self.requests: list[tuple[str, str, dict | None]] = []
        self.group = {
            "stacks": [{"name": "staging", "routingProject": "gpu-runtime"}],
            "appliedPolicyPacks": [{"name": PACK_NAME, "version": 3, "versionTag": "0.1.0-gabc"}],
        }

    def __call__(self, method: str, url: str, json: dict | None = None, headers: dict | None = None,
                 **_: object) -> Response:
        if (headers or {}).get("Authorization") != f"token {self.token}" or not self.token:
            return Response(401, {"code": 401, "message": "Unauthorized: No credentials provided or are invalid."})
        self.requests.append((method, url, json))
        if url.endswith("/policygroups/missing"):
            return Response(404)
        return Response(200, self.group if method == "GET" else {})


def test_the_pulumi_cloud_adapter_reads_and_changes_policy_groups_through_the_rest_api() -> None:
    from validation.adapters.bootstrap import PulumiCloudPolicies

    service = FakePulumiCloud("t")
    cloud = PulumiCloudPolicies(Recorded({}), request=service, token="t")
    assert cloud.group("impulse", "missing") is None
    assert cloud.group("impulse", POLICY_GROUP) == PolicyGroup(
        frozenset({("gpu-runtime", "staging")}), frozenset({(PACK_NAME, "0.1.0-gabc")})
    )
    cloud.add_stack("impulse", POLICY_GROUP, "gpu-runtime", "production")
    assert service.requests[-1] == (
        "PATCH",
        f"https://api.pulumi.com/api/orgs/impulse/policygroups/{POLICY_GROUP}",
        {"addStack": {"name": "production", "routingProject": "gpu-runtime"}},
    )
    with pytest.raises(AssertionError):  # a wrong token: 401, never read as "no group"
        PulumiCloudPolicies(Recorded({}), request=service, token="other").group("impulse", POLICY_GROUP)


def test_the_policy_calls_use_the_token_pulumi_login_stored(tmp_path, monkeypatch) -> None:
    """``pulumi login`` sets no environment variable: the REST calls take the CLI's stored credentials."""
    from validation.adapters.bootstrap import PulumiCloudPolicies

    monkeypatch.delenv("PULUMI_ACCESS_TOKEN", raising=False)
    monkeypatch.delenv("PULUMI_CREDENTIALS_PATH", raising=False)
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path))
    # the shape `pulumi login` writes (pulumi/pulumi sdk/go/common/workspace/creds.go, Credentials)
    (tmp_path / "credentials.json").write_text(json.dumps({
        "current": "https://api.pulumi.com", "accessTokens": {"https://api.pulumi.com": "pul-stored"},
        "accounts": {"https://api.pulumi.com": {"accessToken": "pul-stored", "username": "alice"}}}))

    cloud = PulumiCloudPolicies(Recorded({}), request=FakePulumiCloud("pul-stored"))

    assert cloud.group("impulse", POLICY_GROUP) is not None


@pytest.mark.parametrize("credentials", [None, {"current": "file://~", "accessTokens": {}}])
def test_without_a_pulumi_cloud_login_the_bootstrap_stops_first_naming_the_command(
        tmp_path, monkeypatch, credentials) -> None:
    from typer.testing import CliRunner

    from gpurt.cli.app import app

    monkeypatch.delenv("PULUMI_ACCESS_TOKEN", raising=False)
    monkeypatch.delenv("PULUMI_CREDENTIALS_PATH", raising=False)
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path))
    if credentials is not None:
        (tmp_path / "credentials.json").write_text(json.dumps(credentials))
    result = CliRunner().invoke(app, ["bootstrap", "--stack", "staging", "--github-repository", "o/r",
                                      "--pulumi-org", "impulse", "--work-dir", str(ROOT)], env={"COLUMNS": "200"})

    assert result.exit_code != 0 and "Traceback" not in result.output
    # refused before the first step (which would run gcloud): the login is checked first
    assert "no Pulumi Cloud access token: `pulumi login`" in " ".join(result.output.split())


def test_publishing_installs_the_packs_virtualenv_first(tmp_path) -> None:
    """``pulumi policy publish`` runs the pack in the virtualenv its PulumiPolicy.yaml names; none is made
    by the CLI, so it must exist before (the bundle's default, ``venv``)."""
    from validation.adapters.bootstrap import PulumiCloudPolicies

    bundle = write_bundle(tmp_path / "pack")
    run = Recorded({})
    PulumiCloudPolicies(run, request=FakePulumiCloud("t"), token="t").publish("impulse", bundle)

    commands = [call[0] for call in run.calls]
    assert commands[0][1:] == ["-m", "venv", str(bundle / "venv")]
    assert commands[1][:5] == [str(bundle / "venv" / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    assert commands[1][-2:] == ["-r", "requirements.txt"] and run.calls[1][1] == bundle
    assert commands[2] == ["pulumi", "policy", "publish", "impulse"]


def test_the_pulumi_adapter_uses_the_stack_of_its_org_whatever_the_callers_default(tmp_path, monkeypatch) -> None:
    """An admin whose default organization is their own account, holding a stack of the same name.

    The stand-in CLI resolves a bare name against the default organization, as Pulumi Cloud does: a bare
    ``staging`` would find the admin's own stack, skip creating the organization's, and configure the wrong one.
    """
    import os

    from tests.validation.recording_pulumi_cli import RecordingPulumiCli
    from validation.adapters.bootstrap import PulumiCliStacks

    cli = RecordingPulumiCli(tmp_path / "cli", history=[], stacks=("alice/gpu-runtime/staging",),
                             default_org="alice")
    monkeypatch.setenv("PATH", f"{cli.bin_dir}:{os.environ['PATH']}")
    program = tmp_path / "program"
    program.mkdir()
    (program / "Pulumi.yaml").write_text("name: gpu-runtime\nruntime: python\n")
    stacks = PulumiCliStacks(org="impulse")

    assert not stacks.exists(program, "staging")  # alice's own staging is not the organization's
    stacks.create(program, "staging")
    stacks.set_config(program, "staging", CONTROL_TOKEN_KEY, "s3cret", secret=True)

    assert cli.stacks() == ["alice/gpu-runtime/staging", "impulse/gpu-runtime/staging"]
    assert stacks.exists(program, "staging")
    assert stacks.config_keys(program, "staging") == {CONTROL_TOKEN_KEY: None}
    assert all(call["argv"][call["argv"].index("--stack") + 1] == "impulse/gpu-runtime/staging"
               for call in cli.calls() if "--stack" in call["argv"])


def test_the_repository_ids_come_from_githubs_api() -> None:
    from validation.adapters.bootstrap import GithubRepositories

    run = Recorded({"gh api repos/impulse-risk/gpu-runtime": json.dumps(
        {"id": 812345678, "full_name": "impulse-risk/gpu-runtime", "owner": {"login": "impulse-risk", "id": 98765}})})

    assert GithubRepositories(run).ids("impulse-risk/gpu-runtime") == ("812345678", "98765")


# --- the gcloud adapter against a gcloud that answers and fails as the real one does -----------------------------


def test_only_not_found_means_the_repository_is_missing() -> None:
    """issue #42: a disabled API (or a missing permission) said "missing" before; it says nothing about the
    repository, so the adapter raises with gcloud's own message instead."""
    from tests.validation.fake_gcloud import FakeGcloud
    from validation.adapters.bootstrap import GcloudSetup

    gcloud = FakeGcloud(PROJECT, repositories={"gpu-runtime"})
    assert GcloudSetup(gcloud).repository_exists(PROJECT, "us-central1", "gpu-runtime")
    assert not GcloudSetup(gcloud).repository_exists(PROJECT, "us-central1", "other")

    gcloud.disabled_apis.add("artifactregistry.googleapis.com")
    with pytest.raises(BootstrapError, match=r"cannot tell whether Artifact Registry repository gpu-runtime exists "
                                             r"in us-central1: .*PERMISSION_DENIED: Artifact Registry API has not"):
        GcloudSetup(gcloud).repository_exists(PROJECT, "us-central1", "gpu-runtime")


def test_billing_is_read_from_the_project_billing_info_whose_false_fields_are_absent() -> None:
    from tests.validation.fake_gcloud import FakeGcloud
    from validation.adapters.bootstrap import GcloudSetup

    assert GcloudSetup(FakeGcloud(PROJECT)).billing_enabled(PROJECT)
    unlinked = FakeGcloud(PROJECT, billing_account=None)
    assert not GcloudSetup(unlinked).billing_enabled(PROJECT)
    assert unlinked.calls == [["gcloud", "billing", "projects", "describe", PROJECT, "--format=json"]]


def test_compute_quota_limits_come_from_regions_get_and_projects_get() -> None:
    from tests.validation.fake_gcloud import FakeGcloud
    from validation.adapters.bootstrap import GcloudSetup

    limits = GcloudSetup(FakeGcloud(PROJECT)).compute_quota_limits(PROJECT, "us-central1")
    assert limits[("us-central1", "PREEMPTIBLE_NVIDIA_T4_GPUS")] == 4 and limits[("us-central1", "CPUS")] == 2400
    assert limits[("global", "GPUS_ALL_REGIONS")] == 4 and ("us-central1", "GPUS_ALL_REGIONS") not in limits


def test_the_check_cli_reports_each_missing_prerequisite_without_a_traceback(monkeypatch) -> None:
    """A gcloud that cannot run the check's calls (the API off) gives one red line and exit 1."""
    from typer.testing import CliRunner

    import validation.adapters.bootstrap as adapters
    from gpurt.cli.app import app
    from tests.validation.fake_gcloud import FakeGcloud

    gcloud = FakeGcloud(PROJECT, disabled_apis={"artifactregistry.googleapis.com"})
    real = adapters.GcloudSetup
    monkeypatch.setattr(adapters, "GcloudSetup", lambda: real(gcloud))
    result = CliRunner().invoke(app, ["bootstrap", "--check", "--stack", "staging", "--pulumi-org", "impulse",
                                      "--work-dir", str(ROOT)],
                                env={"COLUMNS": "300"})
    assert result.exit_code == 1, result.output
    assert "error: cannot tell whether Artifact Registry repository gpu-runtime exists" in " ".join(
        result.output.split())
