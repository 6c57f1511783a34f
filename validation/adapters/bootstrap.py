"""The bootstrap's seams over their real services: gcloud, the Pulumi CLI, and Pulumi Cloud's REST API.

Each adapter runs one command or request per seam method and parses its answer, nothing more; the steps and
their idempotence live in ``validation.bootstrap``. Commands go through an injectable runner so the parsing
can be exercised without the tools.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from components.review.quotas import GLOBAL
from validation.bootstrap import BootstrapError, PolicyGroup

Runner = Callable[[Sequence[str], Path | None, str | None], str]
PULUMI_API: Final = "https://api.pulumi.com"
# Pulumi Cloud's REST API version header (its reference shows every request with it).
_ACCEPT: Final = "application/vnd.pulumi+8"
_TIMEOUT_S: Final = 60.0


class CommandFailed(BootstrapError):
    """A command exited non-zero; ``stderr`` holds what it said (the seam reads its error code there)."""

    def __init__(self, args: Sequence[str], stderr: str) -> None:
        super().__init__(f"{' '.join(args[:4])} failed: {stderr.strip()[-800:]}")
        self.stderr = stderr


def run_command(args: Sequence[str], cwd: Path | None = None, stdin: str | None = None) -> str:
    """Run a command, return its stdout; a failure raises ``CommandFailed`` with the command's own message."""
    try:
        done = subprocess.run(list(args), cwd=cwd, input=stdin, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise CommandFailed(args, f"{args[0]} is not on PATH (docs/infrastructure.md, step 1)") from None
    if done.returncode != 0:
        raise CommandFailed(args, done.stderr or done.stdout)
    return done.stdout


class GcloudSetup:
    """``CloudSetup`` over the gcloud CLI (the caller's own credentials)."""

    def __init__(self, run: Runner = run_command) -> None:
        self._run = run

    def enabled_services(self, project: str) -> set[str]:
        """The APIs enabled in ``project``."""
        out = self._run(
            ["gcloud", "services", "list", "--enabled", "--project", project, "--format=value(config.name)"], None, None
        )
        return {line.strip() for line in out.splitlines() if line.strip()}

    def enable_services(self, project: str, services: Sequence[str]) -> None:
        """Enable ``services`` (gcloud calls Service Usage on its own quota project, so this works first)."""
        self._run(["gcloud", "services", "enable", *services, "--project", project], None, None)

    def repository_exists(self, project: str, region: str, repository: str) -> bool:
        """Whether the repository exists: describe answers it, or fails with NOT_FOUND when it does not. Any
        other failure (the API disabled, a permission missing) says nothing about the repository and is raised."""
        try:
            self._run(["gcloud", "artifacts", "repositories", "describe", repository, "--location", region,
                       "--project", project, "--format=value(name)"], None, None)
        except CommandFailed as exc:
            # gcloud prints the API's status: "ERROR: (gcloud.artifacts.repositories.describe) NOT_FOUND: ..."
            if " NOT_FOUND: " in exc.stderr:
                return False
            raise BootstrapError(f"cannot tell whether Artifact Registry repository {repository} exists in "
                                 f"{region}: {exc.stderr.strip()[-400:]}") from None
        return True

    def billing_enabled(self, project: str) -> bool:
        """Whether ``project`` is linked to an open billing account (its ProjectBillingInfo's ``billingEnabled``,
        which the API leaves out when false, as proto3 JSON omits default values)."""
        info = json.loads(self._run(["gcloud", "billing", "projects", "describe", project, "--format=json"],
                                    None, None) or "{}")
        return bool(info.get("billingEnabled", False))

    def compute_quota_limits(self, project: str, region: str) -> dict[tuple[str, str], float]:
        """Compute Engine's quota limits by (scope, metric): the region's (``regions.get``) and the project's
        global ones (``projects.get``, scope ``global``), each ``quotas[]`` entry a {metric, limit, usage}."""
        regional = json.loads(self._run(["gcloud", "compute", "regions", "describe", region, "--project", project,
                                         "--format=json"], None, None) or "{}")
        overall = json.loads(self._run(["gcloud", "compute", "project-info", "describe", "--project", project,
                                        "--format=json"], None, None) or "{}")
        return {**{(region, q["metric"]): float(q.get("limit", 0)) for q in regional.get("quotas") or []},
                **{(GLOBAL, q["metric"]): float(q.get("limit", 0)) for q in overall.get("quotas") or []}}


class GithubRepositories:
    """GitHub's numeric ids of a repository and its owner, through the ``gh`` CLI (the caller's login)."""

    def __init__(self, run: Runner = run_command) -> None:
        self._run = run

    def ids(self, repository: str) -> tuple[str, str]:
        """``(repository id, owner id)`` of ``OWNER/NAME`` (GitHub REST: ``GET /repos/{owner}/{repo}``)."""
        found = json.loads(self._run(["gh", "api", f"repos/{repository}"], None, None) or "{}")
        return str(found["id"]), str(found["owner"]["id"])


class PulumiCliStacks:
    """``Stacks`` over the Pulumi CLI, in the program's folder, each stack named ``ORG/PROJECT/STACK``.

    ``org``: the Pulumi Cloud organization the stacks live in (the one whose policy group enforces the pack).
    Every command names the stack fully: Pulumi Cloud resolves a bare name against the caller's default
    organization (pkg/backend/httpstate/backend.go ``ParseStackReference``), which for a personal token or an
    admin's own account is not this one.
    """

    def __init__(self, org: str, run: Runner = run_command) -> None:
        if not org:
            raise ValueError("the Pulumi organization of the stacks is needed (--pulumi-org)")
        self._run = run
        self._org = org

    def qualified(self, work_dir: Path, stack: str) -> str:
        """``ORG/PROJECT/STACK``, the project being the one ``work_dir``'s ``Pulumi.yaml`` names."""
        import yaml

        project = yaml.safe_load((work_dir / "Pulumi.yaml").read_text())["name"]
        return f"{self._org}/{project}/{stack}"

    def exists(self, work_dir: Path, stack: str) -> bool:
        """Whether ``stack`` exists in the organization (a stack of that name in another one does not count)."""
        project = self.qualified(work_dir, stack).split("/")[1]
        listed = json.loads(self._run(["pulumi", "stack", "ls", "--json", "--organization", self._org,
                                       "--project", project], work_dir, None) or "[]")
        return any(str(entry.get("name", "")).rsplit("/", 1)[-1] == stack for entry in listed)

    def create(self, work_dir: Path, stack: str) -> None:
        """Create and select ``stack`` in the organization."""
        self._run(["pulumi", "stack", "select", "--create", self.qualified(work_dir, stack), "--non-interactive"],
                  work_dir, None)

    def config_keys(self, work_dir: Path, stack: str) -> dict[str, str | None]:
        """The config of ``stack``; secrets are listed without their values (no --show-secrets)."""
        config = json.loads(self._run(["pulumi", "config", "--json", "--stack", self.qualified(work_dir, stack)],
                                      work_dir, None) or "{}")
        return {key: None if entry.get("secret") else str(entry.get("value")) for key, entry in config.items()}

    def set_config(self, work_dir: Path, stack: str, key: str, value: str, secret: bool, path: bool = False) -> None:
        """Set ``key``; the value goes through stdin, so a secret never shows in a process list."""
        flags = [*(["--secret"] if secret else []), *(["--path"] if path else [])]
        self._run(["pulumi", "config", "set", *flags, key, "--stack", self.qualified(work_dir, stack),
                   "--non-interactive"], work_dir, value)

    def up(self, work_dir: Path, stack: str) -> int:
        """Deploy; the number of resources changed, from the update's summary."""
        name = self.qualified(work_dir, stack)
        self._run(["pulumi", "up", "--yes", "--stack", name, "--non-interactive"], work_dir, None)
        history = json.loads(
            self._run(["pulumi", "stack", "history", "--json", "--page-size", "1", "--stack", name], work_dir, None)
            or "[]"
        )
        changes = (history[0].get("resourceChanges") or {}) if history else {}
        return sum(int(count) for op, count in changes.items() if op != "same")

    def outputs(self, work_dir: Path, stack: str) -> dict[str, str]:
        """The stack's outputs (the bootstrap's are all plain names)."""
        return {
            key: str(value)
            for key, value in json.loads(
                self._run(["pulumi", "stack", "output", "--json", "--stack", self.qualified(work_dir, stack)], work_dir,
                          None) or "{}"
            ).items()
        }


def pulumi_cloud_credentials(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """The Pulumi Cloud API URL and access token the Pulumi CLI uses; ``ValueError`` naming the fix when none.

    As the CLI: ``PULUMI_ACCESS_TOKEN`` first, else what ``pulumi login`` stored in ``credentials.json``
    (``$PULUMI_CREDENTIALS_PATH``, else ``$PULUMI_HOME``, else ``~/.pulumi``): the token of its ``current``
    backend in ``accessTokens`` (pulumi/pulumi sdk/go/common/workspace/creds.go, ``Credentials`` and
    ``getCredsFilePath``). A CLI that keeps its credentials encrypted (the OS keychain) leaves no readable token:
    then the environment variable is the way.
    """
    env = os.environ if env is None else env
    fix = ("no Pulumi Cloud access token: `pulumi login` as an organization admin, or `export "
           "PULUMI_ACCESS_TOKEN=<token>` (https://app.pulumi.com/account/tokens)")
    if env.get("PULUMI_ACCESS_TOKEN"):
        backend = env.get("PULUMI_BACKEND_URL", "")
        return (backend if backend.startswith("https://") else PULUMI_API), env["PULUMI_ACCESS_TOKEN"]
    folder = env.get("PULUMI_CREDENTIALS_PATH") or env.get("PULUMI_HOME") or str(Path.home() / ".pulumi")
    path = Path(folder) / "credentials.json"
    try:
        credentials = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{fix}; {path} does not exist") from None
    except (OSError, ValueError):
        raise ValueError(f"{fix}; {path} is not readable JSON (encrypted by the CLI?)") from None
    current = str(credentials.get("current") or "")
    token = (credentials.get("accessTokens") or {}).get(current)
    if not current.startswith("https://") or not token:
        # a self-managed backend (file://, gs://) has no REST API and no policy groups
        raise ValueError(f"{fix}; the CLI is logged in to {current or 'nothing'}, not to Pulumi Cloud")
    return ("https://api.pulumi.com" if current == "https://app.pulumi.com" else current), str(token)


class PulumiCloudPolicies:
    """``PolicyService``: packs through the Pulumi CLI, policy groups through Pulumi Cloud's REST API.

    The REST calls use the credentials the CLI holds (``pulumi_cloud_credentials``), resolved here, so a missing
    login stops ``gpurt bootstrap`` before its first step rather than with a 401 at its last.
    """

    def __init__(
        self,
        run: Runner = run_command,
        request: Callable[..., Any] | None = None,
        token: str | None = None,
        api: str | None = None,
    ) -> None:
        import httpx

        self._run = run
        self._request = request or httpx.request
        if token is None:
            found_api, token = pulumi_cloud_credentials()
            api = api or found_api
        self._token = token
        self._api = api or PULUMI_API

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = self._request(
            method,
            f"{self._api}{path}",
            json=body,
            timeout=_TIMEOUT_S,
            headers={"Accept": _ACCEPT, "Authorization": f"token {self._token}"},
        )
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return response.json() if response.content else {}

    def published(self, org: str, pack: str) -> set[str]:
        """Version tags of ``pack`` in ``org``."""
        listed = self._call("GET", f"/api/orgs/{org}/policypacks") or {}
        return {
            str(tag)
            for entry in listed.get("policyPacks") or []
            if entry.get("name") == pack
            for tag in entry.get("versionTags") or []
        }

    def publish(self, org: str, bundle: Path) -> None:
        """``pulumi policy publish ORG`` in the pack's folder, its virtualenv installed first.

        Publishing runs the pack to read its policies, in the ``virtualenv`` its ``PulumiPolicy.yaml`` names;
        the CLI does not create that environment, so it is made here from the pack's ``requirements.txt``.
        """
        import sys

        import yaml

        settings = yaml.safe_load((bundle / "PulumiPolicy.yaml").read_text())
        virtualenv = Path(settings["runtime"]["options"]["virtualenv"])
        if not virtualenv.is_absolute():  # an absolute one is an existing environment (`--virtualenv`), kept
            self._run([sys.executable, "-m", "venv", str(bundle / virtualenv)], bundle, None)
            self._run([str(bundle / virtualenv / "bin" / "python"), "-m", "pip", "install", "--quiet", "-r",
                       "requirements.txt"], bundle, None)
        self._run(["pulumi", "policy", "publish", org], bundle, None)

    def group(self, org: str, name: str) -> PolicyGroup | None:
        """The group's stacks and enforced packs."""
        found = self._call("GET", f"/api/orgs/{org}/policygroups/{name}")
        if found is None:
            return None
        return PolicyGroup(
            stacks=frozenset((s["routingProject"], s["name"]) for s in found.get("stacks") or []),
            packs=frozenset((p["name"], str(p.get("versionTag", ""))) for p in found.get("appliedPolicyPacks") or []),
        )

    def create_group(self, org: str, name: str) -> None:
        """A preventative group for stacks: its mandatory policies stop a preview or update."""
        self._call(
            "POST", f"/api/orgs/{org}/policygroups", {"name": name, "entityType": "stacks", "mode": "preventative"}
        )

    def add_stack(self, org: str, group: str, project: str, stack: str) -> None:
        """Add ``project/stack`` to the group."""
        self._call(
            "PATCH", f"/api/orgs/{org}/policygroups/{group}", {"addStack": {"name": stack, "routingProject": project}}
        )

    def enable(self, org: str, group: str, pack: str, version: str) -> None:
        """``pulumi policy enable ORG/PACK VERSION --policy-group GROUP``."""
        self._run(["pulumi", "policy", "enable", f"{org}/{pack}", version, "--policy-group", group], None, None)


class RegistryDigests:
    """``ImageDigests`` over the registries' distribution API (``validation/adapters/registry.py``)."""

    def digest(self, reference: str) -> str:
        """The digest served for ``reference`` now."""
        from validation.adapters.registry import manifest_digest

        return manifest_digest(reference)
