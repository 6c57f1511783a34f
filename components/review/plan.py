"""Offline plan: run the real Pulumi program under mocks with a stack's config, record it, check the policies.

No Pulumi CLI, no cloud credentials. ``__main__.py`` is executed as-is (``runpy``) against a mock engine
whose monitor records every registered resource (type, name, parent, inputs) and whose mocks answer
with realistic provider outputs (resource ids, service-account e-mails, cluster endpoint, the project
number), so everything derived from outputs is exercised too. The recorded resources then go through
``components.policy.rules`` — the same rules the pulumi-policy pack enforces during ``pulumi preview``.

Secrets: a stack file's ``secure:`` values cannot be decrypted offline, and a secret the project declares
but the stack lacks cannot be read; both get a placeholder that is plainly not a secret and is listed in
the plan's ``placeholders``. Secret values are masked in everything the plan prints.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import runpy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pulumi
import yaml
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc, settings
from pulumi.runtime.stack import run_in_stack
from pulumi.runtime.sync_await import _sync_await  # what the SDK's own pulumi.runtime.test drives programs with

from components.config import PROJECT_NAMESPACE, VertexConfig
from components.policy import rules
from components.rendered import SERVICE_ACCOUNT, Resource
from components.review.cost import CostError, CostEstimate, estimate, load_price_table
from components.review.quotas import QuotaNeed, quota_needs

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
STACKS: Final = ("staging", "production")
SECRET_PLACEHOLDER: Final = "offline-plan-placeholder-not-a-secret"
MASK: Final = "[secret]"
_STACK_TYPE: Final = "pulumi:pulumi:Stack"
IAM_PROOF_RULE: Final = "iam-least-privilege"
IAM_PROOF_DESCRIPTION: Final = (
    "every cloud call of the code (components/review/cloud_calls.py) is granted to the identity making it, "
    "and every grant to the platform's accounts is needed by one"
)
CI_PROOF_RULE: Final = "ci-least-privilege"
CI_PROOF_DESCRIPTION: Final = (
    "the bootstrap's deploy and preview accounts hold what pulumi up / preview of this stack need, and nothing "
    "more (components/review/ci_proof.py)"
)
BOOTSTRAP_PROGRAM: Final = "bootstrap/__main__.py"
# The bootstrap stack's settings the plan cannot know (the repository, GitHub's ids of it and its owner); any
# values render the same grants.
_PLAN_GITHUB_CONFIG: Final = {"gpu-runtime-bootstrap:githubRepository": "owner/repository",
                              "gpu-runtime-bootstrap:githubRepositoryId": "1",
                              "gpu-runtime-bootstrap:githubOwnerId": "1"}


class PlanError(Exception):
    """The plan could not run: unknown stack, unreadable config, or the program itself failed."""


@dataclass(frozen=True)
class RuleResult:
    """One policy rule's verdict over the whole plan."""

    rule: str
    description: str
    violations: tuple[rules.Violation, ...]

    @property
    def passed(self) -> bool:
        """True when no resource violates the rule."""
        return not self.violations


@dataclass(frozen=True)
class Plan:
    """What ``gpurt plan`` reports for one stack."""

    stack: str
    resources: tuple[Resource, ...]
    outputs: Mapping[str, Any]
    policy: tuple[RuleResult, ...]
    placeholders: tuple[str, ...]
    cost: CostEstimate | None = None
    """Estimated monthly cost of the node pools and clusters; None when it cannot be priced."""
    cost_note: str = ""
    """Why there is no cost estimate."""
    quotas: tuple[QuotaNeed, ...] = ()
    project: str = ""
    """The stack's Google Cloud project (``gcp:project``)."""
    """Every quota the pools and the Vertex AI overflow reach at their maxima (a fresh project's GPU quotas are 0)."""

    @property
    def ok(self) -> bool:
        """True when every policy rule passed."""
        return all(result.passed for result in self.policy)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready view: resources (secrets masked), outputs, policy results."""
        return {
            "stack": self.stack,
            "ok": self.ok,
            "placeholders": list(self.placeholders),
            "resources": [r.to_json() for r in self.resources],
            "outputs": self.outputs,
            "cost": self.cost.to_json() if self.cost else {"unavailable": self.cost_note},
            "quotas": [need.to_json() for need in self.quotas],
            "policy": [
                {"rule": p.rule, "description": p.description, "passed": p.passed,
                 "violations": [{"resource": v.resource, "message": v.message} for v in p.violations]}
                for p in self.policy
            ],
        }


# --- configuration -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StackSettings:
    """A stack's config as the engine would hand it to the program."""

    project_name: str
    config: dict[str, str]
    secret_keys: tuple[str, ...]
    placeholders: tuple[str, ...]


def _qualify(key: str, project_name: str) -> str:
    return key if ":" in key else f"{project_name}:{key}"


def _encode(value: Any) -> str:
    # The engine passes every config value as a string; structured ones as JSON (what Config.get_object parses).
    return value if isinstance(value, str) else json.dumps(value)


def load_stack_settings(stack: str, root: Path = REPO_ROOT) -> StackSettings:
    """Merge ``Pulumi.yaml`` defaults with ``Pulumi.<stack>.yaml`` and substitute placeholders for secrets."""
    project_file, stack_file = root / "Pulumi.yaml", root / f"Pulumi.{stack}.yaml"
    if not stack_file.is_file():
        known = sorted(p.name.split(".")[1] for p in root.glob("Pulumi.*.yaml"))
        raise PlanError(f"no stack {stack!r} (no {stack_file.name}); stacks here: {', '.join(known) or 'none'}")
    try:
        project = yaml.safe_load(project_file.read_text()) or {}
        stack_values = (yaml.safe_load(stack_file.read_text()) or {}).get("config") or {}
    except (OSError, yaml.YAMLError) as exc:
        raise PlanError(f"cannot read stack config: {exc}") from None
    project_name = project.get("name", "project")
    config: dict[str, str] = {}
    secret_keys: set[str] = set()
    placeholders: list[str] = []
    for key, declaration in (project.get("config") or {}).items():
        full = _qualify(key, project_name)
        if isinstance(declaration, Mapping):
            if "default" in declaration:
                config[full] = _encode(declaration["default"])
            if declaration.get("secret"):
                secret_keys.add(full)
    for key, value in stack_values.items():
        full = _qualify(key, project_name)
        if isinstance(value, Mapping) and "secure" in value:
            secret_keys.add(full)
            placeholders.append(full)
            config[full] = SECRET_PLACEHOLDER
        else:
            config[full] = _encode(value)
    for full in sorted(secret_keys - config.keys()):
        placeholders.append(full)
        config[full] = SECRET_PLACEHOLDER
    return StackSettings(project_name, config, tuple(sorted(secret_keys)), tuple(placeholders))


# --- the mock engine ---------------------------------------------------------------------------------


def fake_project_number(project_id: str) -> str:
    """A stable 12-digit project number derived from the project id (real numbers are 12 digits)."""
    digest = int(hashlib.sha256(project_id.encode()).hexdigest(), 16)
    return str(100_000_000_000 + digest % 900_000_000_000)


class RealisticMocks(pulumi.runtime.Mocks):
    """Answers resource registrations and invokes the way GCP and Kubernetes would, shape for shape."""

    def __init__(self, project: str, region: str) -> None:
        self.project = project
        self.region = region
        self.project_number = fake_project_number(project)

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
        """Invokes: the project lookup returns a project number, the rest echo their arguments."""
        if args.token == "gcp:organizations/getProject:getProject":
            project = args.args.get("projectId") or self.project
            return {"projectId": project, "number": self.project_number, "name": project, "id": f"projects/{project}"}
        if args.token == "gcp:serviceaccount/getAccount:getAccount":
            # The bootstrap's accounts, read by the main program: what the provider answers for one that exists.
            project = args.args.get("project") or self.project
            _, state = _service_account(self, "", project, {"accountId": args.args["accountId"]})
            return {**dict(args.args), **state}
        if args.token == "gcp:artifactregistry/getRepository:getRepository":
            project = args.args.get("project") or self.project
            return {**dict(args.args), "project": project,
                    "name": f"projects/{project}/locations/{args.args['location']}/repositories/"
                            f"{args.args['repositoryId']}"}
        return dict(args.args)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict]:
        """Resource registrations: inputs come back as state, plus the outputs the provider would add."""
        state = dict(args.inputs)
        name = str(state.get("name") or args.name)
        project = str(state.get("project") or self.project)
        builder = _OUTPUTS.get(args.typ)
        resource_id, extra = builder(self, name, project, state) if builder else (f"{args.name}-id", {})
        state.update(extra)
        return resource_id, state


def _topic(m: RealisticMocks, name: str, project: str, state: dict) -> tuple[str, dict]:
    return f"projects/{project}/topics/{name}", {"name": name}


def _subscription(m: RealisticMocks, name: str, project: str, state: dict) -> tuple[str, dict]:
    return f"projects/{project}/subscriptions/{name}", {"name": name}


def _service_account(m: RealisticMocks, name: str, project: str, state: dict) -> tuple[str, dict]:
    email = f"{state['accountId']}@{project}.iam.gserviceaccount.com"
    unique_id = fake_project_number(email) + "000000000"
    return f"projects/{project}/serviceAccounts/{email}", {
        "email": email, "name": f"projects/{project}/serviceAccounts/{email}", "uniqueId": unique_id,
        "member": f"serviceAccount:{email}",
    }


def _service_identity(m: RealisticMocks, name: str, project: str, state: dict) -> tuple[str, dict]:
    # Google's service agents: service-<project number>@gcp-sa-<service>.iam.gserviceaccount.com
    email = f"service-{m.project_number}@gcp-sa-{str(state['service']).split('.')[0]}.iam.gserviceaccount.com"
    return f"projects/{project}/services/{state['service']}", {"email": email, "member": f"serviceAccount:{email}"}


def _cluster(m: RealisticMocks, name: str, project: str, state: dict) -> tuple[str, dict]:
    location = state.get("location", m.region)
    ca = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk9GRkxJTkUtUExBTgotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg=="
    endpoints = dict(state.get("controlPlaneEndpointsConfig") or {})
    # GKE names the DNS endpoint gke-<uid>.<region>.gke.goog; the uid here is a stable hash of the cluster.
    endpoints["dnsEndpointConfig"] = {**(endpoints.get("dnsEndpointConfig") or {}),
                                      "endpoint": f"gke-{fake_project_number(project + name)}.{location}.gke.goog"}
    return f"projects/{project}/locations/{location}/clusters/{name}", {
        "endpoint": "172.16.0.2",
        "controlPlaneEndpointsConfig": endpoints,
        "masterAuth": {"clusterCaCertificate": ca},
        "selfLink": f"https://container.googleapis.com/v1/projects/{project}/locations/{location}/clusters/{name}",
    }


def _node_pool(m: RealisticMocks, name: str, project: str, state: dict) -> tuple[str, dict]:
    location = state.get("location", m.region)
    return f"projects/{project}/locations/{location}/clusters/{state.get('cluster')}/nodePools/{name}", {}


def _bucket(m: RealisticMocks, name: str, project: str, state: dict) -> tuple[str, dict]:
    return name, {"url": f"gs://{name}", "selfLink": f"https://www.googleapis.com/storage/v1/b/{name}"}


def _repository(m: RealisticMocks, name: str, project: str, state: dict) -> tuple[str, dict]:
    repo_id = state.get("repositoryId", name)
    path = f"projects/{project}/locations/{state.get('location', m.region)}/repositories/{repo_id}"
    return path, {"name": repo_id, "project": project}


def _workload_identity_pool(m: RealisticMocks, name: str, project: str, state: dict) -> tuple[str, dict]:
    # Pools are named by project number: projects/<number>/locations/global/workloadIdentityPools/<id>.
    path = f"projects/{m.project_number}/locations/global/workloadIdentityPools/{state['workloadIdentityPoolId']}"
    return path, {"name": path}


def _workload_identity_provider(m: RealisticMocks, name: str, project: str, state: dict) -> tuple[str, dict]:
    path = (f"projects/{m.project_number}/locations/global/workloadIdentityPools/{state['workloadIdentityPoolId']}"
            f"/providers/{state['workloadIdentityPoolProviderId']}")
    return path, {"name": path}


def _global(kind: str) -> Any:
    def build(m: RealisticMocks, name: str, project: str, state: dict) -> tuple[str, dict]:
        path = f"projects/{project}/global/{kind}/{name}"
        return path, {"selfLink": f"https://www.googleapis.com/compute/v1/{path}"}
    return build


def _regional(kind: str) -> Any:
    def build(m: RealisticMocks, name: str, project: str, state: dict) -> tuple[str, dict]:
        path = f"projects/{project}/regions/{state.get('region', m.region)}/{kind}/{name}"
        return path, {"selfLink": f"https://www.googleapis.com/compute/v1/{path}"}
    return build


_OUTPUTS: Final = {
    "gcp:pubsub/topic:Topic": _topic,
    "gcp:pubsub/subscription:Subscription": _subscription,
    "gcp:serviceaccount/account:Account": _service_account,
    "gcp:projects/serviceIdentity:ServiceIdentity": _service_identity,
    "gcp:container/cluster:Cluster": _cluster,
    "gcp:container/nodePool:NodePool": _node_pool,
    "gcp:storage/bucket:Bucket": _bucket,
    "gcp:artifactregistry/repository:Repository": _repository,
    "gcp:iam/workloadIdentityPool:WorkloadIdentityPool": _workload_identity_pool,
    "gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider": _workload_identity_provider,
    "gcp:compute/network:Network": _global("networks"),
    "gcp:compute/subnetwork:Subnetwork": _regional("subnetworks"),
    "gcp:compute/router:Router": _regional("routers"),
}


def _plain(value: Any, mask: bool) -> Any:
    """Engine values as plain Python: secrets masked or unwrapped, whole floats back to ints.

    The engine's wire format (protobuf Struct) carries every number as a double, so 5 comes back as 5.0.
    """
    if rpc.is_rpc_secret(value):
        if mask:
            return MASK
        value = rpc.unwrap_rpc_secret(value)
    if isinstance(value, Mapping):
        return {k: _plain(v, mask) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, mask) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class DuplicateUrnError(Exception):
    """The program registered two resources with one URN, which ``pulumi up`` refuses."""


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The SDK's mock monitor, also keeping each registration's parent and the stack's outputs."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.recorded: list[Resource] = []
        self.stack_outputs: dict[str, Any] = {}
        self._stack_urn: str | None = None
        self._urns: set[str] = set()

    def RegisterResource(self, request: Any) -> Any:
        """Record the registration, then let the SDK's mock answer it.

        A second resource with the same URN is refused, as the Pulumi engine refuses it at ``pulumi up``
        (the SDK's mocks accept it, so without this a plan would pass a program the engine rejects).
        """
        response = super().RegisterResource(request)
        # (the root stack is registered twice on purpose: by set_mocks, then afresh for the program)
        if request.type != _STACK_TYPE and response.urn in self._urns:
            raise DuplicateUrnError(f"duplicate resource URN {response.urn!r}: two resources of type "
                                    f"{request.type} share the name {request.name!r} under the same parent type; "
                                    "give each a unique name")
        self._urns.add(response.urn)
        if request.type == _STACK_TYPE:
            self._stack_urn = response.urn
        else:
            inputs = rpc.deserialize_properties(request.object)
            self.recorded.append(Resource(
                type=request.type, name=request.name, props=_plain(inputs, mask=False), urn=response.urn,
                parent=request.parent or None, custom=bool(request.custom),
                dependencies=tuple(sorted(set(request.dependencies))), shown=_plain(inputs, mask=True),
                protect=bool(request.protect), delete_before_replace=bool(request.deleteBeforeReplace),
                ignore_changes=tuple(request.ignoreChanges), replace_on_changes=tuple(request.replaceOnChanges),
                provider=request.provider,
            ))
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:
        """Keep the root stack's outputs (the program's exports), masked."""
        if request.urn == self._stack_urn:
            self.stack_outputs = _plain(rpc.deserialize_properties(request.outputs), mask=True)
        return super().RegisterResourceOutputs(request)


# --- running -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recording:
    """What a program registered under the mocks: its resources in registration order, and its exports."""

    resources: tuple[Resource, ...]
    outputs: Mapping[str, Any]


def _ensure_event_loop() -> asyncio.AbstractEventLoop:
    """This thread's event loop, made if it has none: the SDK's mocks run on the current one, and a caller
    that ran ``asyncio.run`` before (a notebook, a test) is left with none."""
    try:
        return asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        return loop


def _refusals_raised_once(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler under ``record``: a registration the monitor refuses fails every future the
    SDK made for that resource, and ``record`` raises the refusal to its caller once. The other futures are never
    read; without this each would be logged ("Future exception was never retrieved", with the traceback) when
    the next recording lets them go, 26 of them for one duplicate name. Anything else is reported as usual."""
    if isinstance(context.get("exception"), DuplicateUrnError):
        return
    loop.default_exception_handler(context)


def record(
    program: Callable[[], object],
    *,
    project: str,
    region: str,
    stack: str = "test",
    project_name: str = "gpu-runtime",
    config: Mapping[str, str] | None = None,
    secret_keys: tuple[str, ...] = (),
) -> Recording:
    """Run ``program`` inside a fresh root stack under ``RealisticMocks`` and return what it registered.

    Exceptions from the program propagate. Safe to call repeatedly in one process: each call resets the
    SDK's global settings and installs its own stack.
    """
    loop = _ensure_event_loop()
    if loop.get_exception_handler() is None:  # a caller's own handler (a notebook's) is left in place
        loop.set_exception_handler(_refusals_raised_once)
    monitor = RecordingMonitor(RealisticMocks(project, region))
    settings.reset_options(project=project_name, stack=stack, preview=False)
    pulumi.runtime.set_mocks(monitor.mocks, project=project_name, stack=stack, preview=False, monitor=monitor)
    # set_mocks registers (and finishes) a root stack of its own; the program gets a fresh one, as under the CLI.
    settings.set_root_resource(None)  # type: ignore[arg-type]
    pulumi.runtime.set_all_config(dict(config or {}), list(secret_keys))
    try:
        _sync_await(run_in_stack(program))
    finally:
        settings.set_root_resource(None)  # type: ignore[arg-type]
    return Recording(tuple(monitor.recorded), monitor.stack_outputs)


def run_plan(stack: str, root: Path | None = None) -> Plan:
    """Run ``root/__main__.py`` (default: this checkout) for ``stack`` under mocks and check the policy rules."""
    root = root or REPO_ROOT
    stack_settings = load_stack_settings(stack, root)
    program = root / "__main__.py"
    try:
        recording = record(
            lambda: runpy.run_path(str(program), run_name="__main__"),
            project=stack_settings.config.get("gcp:project", ""),
            region=stack_settings.config.get("gcp:region", ""),
            stack=stack,
            project_name=stack_settings.project_name,
            config=stack_settings.config,
            secret_keys=stack_settings.secret_keys,
        )
    except pulumi.RunError as exc:
        raise PlanError(str(exc)) from None
    except Exception as exc:
        raise PlanError(f"the program failed for stack {stack}: {type(exc).__name__}: {exc}") from exc

    # Components too: a stack rule reads the GKE component's input (the acknowledged pool replacements).
    policy = judge(recording.resources, stack_settings.config.get("gcp:project", ""))
    if (root / BOOTSTRAP_PROGRAM).is_file():  # a revision from before the bootstrap has none to prove
        policy = (*policy, _ci_proof(root, stack, stack_settings, recording.resources))
    cost, cost_note = plan_cost(recording.resources, stack_settings.config.get("gcp:region", ""))
    try:
        quotas = quota_needs(recording.resources, stack_settings.config.get("gcp:region", ""),
                             _vertex_ai(stack_settings.config))
    except ValueError as exc:  # a machine type whose vCPUs the quota table cannot tell
        raise PlanError(f"stack {stack}: {exc}") from None
    return Plan(stack, recording.resources, recording.outputs, policy, stack_settings.placeholders,
                cost, cost_note, quotas, stack_settings.config.get("gcp:project", ""))


def _vertex_ai(config: Mapping[str, Any]) -> VertexConfig | None:
    """The stack's Vertex AI settings when it submits custom jobs (then their GPUs need Vertex AI's quota)."""
    raw = config.get(f"{PROJECT_NAMESPACE}:vertex")
    vertex = VertexConfig.model_validate(json.loads(raw) if isinstance(raw, str) else raw) if raw else None
    return vertex if vertex is not None and vertex.uses_vertex_ai else None


def judge(resources: Sequence[Resource], project: str) -> tuple[RuleResult, ...]:
    """The verdict of this checkout's policy rules and IAM proof on rendered ``resources``."""
    verdicts = rules.evaluate(resources)
    descriptions = {rule.id: rule.description for rule in (*rules.RESOURCE_RULES, *rules.STACK_RULES)}
    policy = tuple(
        RuleResult(rule_id, descriptions[rule_id], tuple(violations)) for rule_id, violations in verdicts.items()
    )
    return (*policy, _iam_proof(resources, project))


def judge_plan_json(plan: Mapping[str, Any]) -> tuple[RuleResult, ...]:
    """The verdict of this checkout's rules on a plan another checkout wrote (``gpurt plan --json``).

    CI judges a pull request's plan with the base branch's rules this way: the pull request renders its
    resources, and the base branch's code, installed before any of the pull request's runs, judges them.
    """
    try:
        resources = [Resource.from_json(r) for r in plan["resources"]]
    except (KeyError, TypeError) as exc:
        raise PlanError(f"not a plan written by gpurt plan --json: no {exc} in its resources") from None
    accounts = [r.get("project") for r in resources if r.type == SERVICE_ACCOUNT]
    verdicts = judge(resources, str(accounts[0]) if accounts else "")
    stack = str(plan.get("stack") or "")
    if (REPO_ROOT / BOOTSTRAP_PROGRAM).is_file() and (REPO_ROOT / f"Pulumi.{stack}.yaml").is_file():
        # This checkout's bootstrap grants against the plan's needs: a pull request cannot widen the grants, and
        # a resource it adds that the deploy account could not manage fails here.
        verdicts = (*verdicts, _ci_proof(REPO_ROOT, stack, load_stack_settings(stack, REPO_ROOT), resources))
    return verdicts


def plan_cost(resources: Iterable[Resource], region: str) -> tuple[CostEstimate | None, str]:
    """The estimated monthly cost of the cloud resources among ``resources`` in ``region``, or None and why not
    (no pricing table)."""
    try:
        return estimate(resources, load_price_table(region)), ""
    except CostError as exc:
        return None, str(exc)


def _ci_proof(root: Path, stack: str, settings: StackSettings, main: Sequence[Resource]) -> RuleResult:
    """The CI proof as one more verdict: the bootstrap program of ``stack`` recorded too, its grants proven."""
    from components.review.ci_proof import prove_ci

    project = settings.config.get("gcp:project", "")
    try:
        bootstrap = record(
            lambda: runpy.run_path(str(root / BOOTSTRAP_PROGRAM), run_name="__main__"), project=project,
            region=settings.config.get("gcp:region", ""), stack=stack, project_name="gpu-runtime-bootstrap",
            config=dict(_PLAN_GITHUB_CONFIG))
    except Exception as exc:
        raise PlanError(f"the bootstrap program failed for stack {stack}: {type(exc).__name__}: {exc}") from exc
    proof = prove_ci(main, bootstrap.resources, project)
    return RuleResult(CI_PROOF_RULE, CI_PROOF_DESCRIPTION, tuple(
        rules.Violation(CI_PROOF_RULE, "bootstrap", message) for message in proof.missing + proof.unused + proof.wider))


def _iam_proof(resources: Sequence[Resource], project: str) -> RuleResult:
    """The IAM proof as one more verdict. Plan-only: it needs resolved values (account e-mails, the pool),
    which a preview does not have yet, so the policy pack cannot run it."""
    from components.review.iam_proof import prove

    proof = prove(resources, project)
    violations = tuple(rules.Violation(IAM_PROOF_RULE, "stack", message)
                       for message in proof.missing + proof.unused + proof.wider)
    return RuleResult(IAM_PROOF_RULE, IAM_PROOF_DESCRIPTION, violations)
