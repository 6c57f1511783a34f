"""The IAM proof: every cloud call of the code is allowed by what the stack grants, and every grant is used.

Both stacks are rendered once (the real ``__main__.py`` under the plan's mocks); the proof must pass on
them, and fail, naming the call, when a grant it relies on is taken away or one nobody needs is added.
The registry is tied to the code: each declared site makes its call, and no undeclared call or client
exists in the scheduler image's modules.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from components.rendered import Resource
from components.review import cloud_calls, iam_permissions
from components.review.iam_proof import ROLE, ROLE_BINDING, prove, scheduler_settings
from components.review.plan import IAM_PROOF_RULE, REPO_ROOT
from runtime.protocol import contract
from runtime.protocol.queues import decode
from tests.components.infra import stack_plan

CLOUD_LIBRARIES = ("google.cloud", "google.auth", "google.api_core", "kubernetes", "fsspec", "gcsfs")


@pytest.fixture(scope="module", params=("staging", "production"))
def rendered(request: pytest.FixtureRequest) -> tuple[list[Resource], str]:
    plan = stack_plan(request.param)
    project = next(r.props["project"] for r in plan.resources if r.type == "gcp:serviceaccount/account:Account")
    return list(plan.resources), project


def _without(resources: list[Resource], drop: Callable[[Resource], bool]) -> list[Resource]:
    kept = [r for r in resources if not drop(r)]
    assert len(kept) < len(resources), "the mutation removed nothing"
    return kept


def test_both_stacks_grant_exactly_what_the_code_needs(rendered: tuple[list[Resource], str]) -> None:
    proof = prove(*rendered)

    assert proof.ok, "\n".join(proof.missing + proof.unused + proof.wider)
    stack = cloud_calls.STACK_WORKLOADS
    always = [c for c in (*cloud_calls.GCP_CALLS, *cloud_calls.KUBE_CALLS) if c.workload in stack]
    # Both stacks overflow to Vertex AI, so its calls are made; neither has queued pools.
    made = [c for c in always if c.only_with in (None, cloud_calls.VERTEX_AI)]
    queues = decode(scheduler_settings([r for r in rendered[0] if r.custom])[contract.SchedulerEnv.QUEUES])
    assert len(proof.proven) == (sum(len(c.permissions) * len(c.for_queues(queues)) for c in made
                                     if isinstance(c, cloud_calls.GcpCall))
                                 + len([c for c in made if isinstance(c, cloud_calls.KubeCall)]))
    # Calls a stack's settings switch off need no grant, and have none.
    assert len(proof.not_made) == len(always) - len(made)
    assert {line.split(": not made, ")[1] for line in proof.not_made} == {str(cloud_calls.QUEUED_POOLS)}


@pytest.mark.parametrize("stack", ("staging", "production"))
def test_the_plan_reports_the_proof_as_a_verdict(stack: str) -> None:
    [verdict] = [p for p in stack_plan(stack).policy if p.rule == IAM_PROOF_RULE]

    assert verdict.passed, verdict.violations


def test_without_the_bucket_binding_every_store_call_is_refused(rendered: tuple[list[Resource], str]) -> None:
    resources, project = rendered
    proof = prove(_without(resources, lambda r: r.type == "gcp:storage/bucketIAMMember:BucketIAMMember"), project)

    refused = {line.split(", needed by ")[1].split(" ")[0] for line in proof.missing}
    # The scheduler's store, and (overflow) the custom job's output, written as gpu-runtime and read back.
    assert refused == {c.site for c in cloud_calls.GCP_CALLS
                       if c.target is cloud_calls.Target.RESULT_BUCKET and c.permissions
                       and c.only_with in (None, cloud_calls.VERTEX_AI)}
    assert all(line.startswith(("gpu-scheduler lacks storage.objects.", "gpu-runtime lacks storage.objects."))
               for line in proof.missing)


def test_without_monitoring_read_the_backlog_call_is_refused(rendered: tuple[list[Resource], str]) -> None:
    resources, project = rendered
    proof = prove(_without(resources, lambda r: r.props.get("role") == "roles/monitoring.viewer"), project)

    assert proof.missing == ("gpu-scheduler lacks monitoring.timeSeries.list on project, needed by "
                             "runtime.scheduler.messaging.depth:MonitoringDepth.undelivered (list_time_series: "
                             "backlog and dead-letter depth)",)


def test_without_workload_identity_the_pods_have_no_google_identity(rendered: tuple[list[Resource], str]) -> None:
    resources, project = rendered
    scheduler_pool_member = f"[{contract.RUNTIME_NAMESPACE}/{contract.SCHEDULER_SERVICE_ACCOUNT.k8s_service_account}]"
    proof = prove(_without(resources, lambda r: str(r.props.get("member", "")).endswith(scheduler_pool_member)),
                  project)

    assert len(proof.missing) == 1 and "the pods cannot act as it" in proof.missing[0]


def test_a_grant_nobody_needs_fails(rendered: tuple[list[Resource], str]) -> None:
    resources, project = rendered
    extra = Resource("gcp:projects/iAMMember:IAMMember", "planted", {
        "project": project, "role": "roles/pubsub.publisher",
        "member": f"serviceAccount:{contract.RUNTIME_SERVICE_ACCOUNT.email(project)}",
    })
    proof = prove([*resources, extra], project)

    assert proof.unused == ("gpu-runtime holds roles/pubsub.publisher on project, which no declared call needs",)


def _member(account: contract.ServiceAccountSpec, project: str) -> str:
    return f"serviceAccount:{account.email(project)}"


def _with_role(resources: list[Resource], old: str, new: str) -> list[Resource]:
    changed = [replace(r, props={**r.props, "role": new}) if r.props.get("role") == old else r for r in resources]
    assert changed != resources, f"no grant of {old}"
    return changed


def test_the_old_project_wide_object_admin_of_gpu_runtime_fails(rendered: tuple[list[Resource], str]) -> None:
    resources, project = rendered
    old = Resource("gcp:projects/iAMMember:IAMMember", "planted", {
        "project": project, "role": "roles/storage.objectAdmin",
        "member": _member(contract.RUNTIME_SERVICE_ACCOUNT, project)})

    # gpu-runtime's calls (a Vertex AI job's params and output) need object roles on the result bucket only, and
    # less than objectAdmin: the old grant is too wide twice over.
    assert prove([*resources, old], project).wider == (
        "gpu-runtime holds roles/storage.objectAdmin on the whole project, but its calls need it only on "
        "result-bucket: bind it there",
        "gpu-runtime holds roles/storage.objectAdmin, but roles/storage.objectUser covers every call it serves "
        "(storage.objects.create, storage.objects.delete, storage.objects.get, storage.objects.list)",
    )


def test_a_project_grant_for_bucket_calls_is_wider_than_they_need(rendered: tuple[list[Resource], str]) -> None:
    resources, project = rendered
    member = _member(contract.SCHEDULER_SERVICE_ACCOUNT, project)
    on_project = [
        Resource("gcp:projects/iAMMember:IAMMember", "planted",
                 {"project": project, "role": r.props["role"], "member": member})
        if r.type == "gcp:storage/bucketIAMMember:BucketIAMMember" and r.props.get("member") == member else r
        for r in resources
    ]
    proof = prove(on_project, project)

    assert not proof.missing and not proof.unused
    assert proof.wider == ("gpu-scheduler holds roles/storage.objectUser on the whole project, but its calls need it "
                           "only on result-bucket: bind it there",)


def test_a_role_wider_than_its_calls_fails(rendered: tuple[list[Resource], str]) -> None:
    resources, project = rendered
    proof = prove(_with_role(resources, "roles/storage.objectUser", "roles/storage.objectAdmin"), project)

    assert not proof.missing and not proof.unused
    assert proof.wider == ("gpu-scheduler holds roles/storage.objectAdmin, but roles/storage.objectUser covers every "
                           "call it serves (storage.objects.create, storage.objects.delete, storage.objects.get, "
                           "storage.objects.list)",
                           "gpu-runtime holds roles/storage.objectAdmin, but roles/storage.objectUser covers every "
                           "call it serves (storage.objects.create, storage.objects.delete, storage.objects.get, "
                           "storage.objects.list)")


def test_workload_identity_for_anything_but_the_platforms_own_pods_fails(
    rendered: tuple[list[Resource], str],
) -> None:
    resources, project = rendered
    [pool] = [r.props["workloadIdentityConfig"]["workloadPool"] for r in resources
              if r.type == "gcp:container/cluster:Cluster"]
    scheduler = contract.SCHEDULER_SERVICE_ACCOUNT
    account_id = f"projects/{project}/serviceAccounts/{scheduler.email(project)}"

    def acting(member: str, role: str = "roles/iam.workloadIdentityUser") -> Resource:
        return Resource("gcp:serviceaccount/iAMMember:IAMMember", "planted",
                        {"serviceAccountId": account_id, "role": role, "member": member})

    stray = [
        acting(f"serviceAccount:{pool}[default/default]"),
        acting(f"serviceAccount:other.svc.id.goog[{scheduler.k8s_namespace}/{scheduler.k8s_service_account}]"),
        acting(f"serviceAccount:{pool}[{contract.RUNTIME_SERVICE_ACCOUNT.k8s_namespace}/"
               f"{contract.RUNTIME_SERVICE_ACCOUNT.k8s_service_account}]"),
        Resource("gcp:projects/iAMMember:IAMMember", "planted", {
            "project": project, "role": "roles/pubsub.publisher",
            "member": f"serviceAccount:{pool}[{scheduler.k8s_namespace}/{scheduler.k8s_service_account}]"}),
    ]
    proof = prove([*resources, *stray], project)

    assert proof.ok is False and not proof.missing and not proof.unused
    assert [line.split(", but ")[-1] for line in proof.wider[:3]] == [
        "the stack has no such Kubernetes account",
        "its pool other.svc.id.goog is not the cluster's",
        f"that account is not annotated iam.gke.io/gcp-service-account={scheduler.email(project)}",
    ] and proof.wider[3].endswith("holds roles/pubsub.publisher directly; pods get roles only through the "
                                  "platform's accounts")


def test_an_rbac_verb_taken_away_or_added_is_caught(rendered: tuple[list[Resource], str]) -> None:
    resources, project = rendered

    def with_lease_verbs(verbs: list[str]) -> list[Resource]:
        changed = []
        for resource in resources:
            if resource.type == ROLE and resource.props["metadata"]["namespace"] == contract.RUNTIME_NAMESPACE:
                rules = [{**rule, "verbs": verbs} if rule.get("resourceNames") and rule["resources"] == ["leases"]
                         else rule
                         for rule in resource.props["rules"]]
                resource = replace(resource, props={**resource.props, "rules": rules})
            changed.append(resource)
        return changed

    taken = prove(with_lease_verbs(["get"]), project)
    added = prove(with_lease_verbs(["get", "update", "delete"]), project)

    assert [m.split(", needed by ")[0] for m in taken.missing] == [
        f"('{contract.RUNTIME_NAMESPACE}', 'gpu-scheduler') may not update leases/{contract.LEADER_LEASE_NAME} "
        f"in {contract.RUNTIME_NAMESPACE}"
    ]
    assert added.unused == (
        f"Role {contract.RUNTIME_NAMESPACE}/gpu-scheduler-leader-election grants delete on leases "
        "(coordination.k8s.io), which no declared call needs",
    )
    unbound = prove(_without(resources, lambda r: r.type == ROLE_BINDING), project)
    assert len(unbound.missing) == len([c for c in cloud_calls.KUBE_CALLS
                                        if c.workload in cloud_calls.STACK_WORKLOADS and c.only_with is None])


# --- the registry against the code -------------------------------------------------------------------


class UnresolvedSite(AssertionError):
    """A declared site names no function of its module (renamed, moved, or not a function)."""


def _resolve(site: str) -> Callable[..., object]:
    """The function ``module:Qualified.name`` names, walked attribute by attribute from its module."""
    module_name, sep, qualname = site.partition(":")
    if not sep or not qualname:
        raise UnresolvedSite(f"{site!r} is not module:Qualified.function")
    try:
        obj: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnresolvedSite(f"{site}: module {module_name} cannot be imported ({exc})") from None
    walked = module_name
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise UnresolvedSite(f"{site}: {walked} has no {part!r} (renamed or moved?)")
        obj, walked = getattr(obj, part), f"{walked}.{part}"
    function = inspect.unwrap(obj)  # type: ignore[arg-type]
    if not inspect.isfunction(function):
        raise UnresolvedSite(f"{site} is a {type(obj).__name__}, not a function or method")
    # A name imported into the module would resolve too, but the call would live elsewhere.
    if function.__module__ != module_name or function.__qualname__ != qualname:
        raise UnresolvedSite(f"{site} is {function.__module__}:{function.__qualname__}: declare it there")
    return function


def _function(site: str) -> ast.AST:
    return ast.parse(inspect.cleandoc("\n" + inspect.getsource(_resolve(site))))


def _client_calls(tree: ast.AST, receivers: tuple[str, ...]) -> Iterator[str]:
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and ast.unparse(node.func.value) in receivers):
            yield node.func.attr
        # A bound client method handed to a helper that calls it (kubernetes.stream.portforward(api.method, ...)).
        if isinstance(node, ast.Call):
            yield from (arg.attr for arg in node.args
                        if isinstance(arg, ast.Attribute) and ast.unparse(arg.value) in receivers)


DECLARED = [(c.site, c.method) for c in (*cloud_calls.GCP_CALLS, *cloud_calls.KUBE_CALLS)]


def _makes_call(site: str, method: str) -> bool:
    """Whether the function ``site`` names calls ``method`` on one of its module's cloud clients."""
    receivers = cloud_calls.CLIENT_SITES.get(site.split(":")[0])
    assert receivers is not None, f"{site}: its module holds no client listed in CLIENT_SITES"
    return method in set(_client_calls(_function(site), receivers))


@pytest.mark.parametrize("site", sorted({site for site, _ in DECLARED}))
def test_each_declared_site_is_a_function_of_its_module(site: str) -> None:
    assert inspect.isfunction(_resolve(site))


@pytest.mark.parametrize(("site", "method"), sorted(set(DECLARED)), ids=lambda v: v)
def test_each_declared_site_makes_its_call(site: str, method: str) -> None:
    assert _makes_call(site, method), f"{site} does not call {method} on {cloud_calls.CLIENT_SITES[site.split(':')[0]]}"


@pytest.mark.parametrize(("site", "why"), [
    ("runtime.scheduler.consumer:Consumer._opened", "has no '_opened'"),       # a renamed method
    ("scheduler.consumers:Consumer._open", "cannot be imported"),      # a renamed module
    ("runtime.scheduler.consumer:Consumer", "not a function"),                 # a class, not its method
    ("runtime.scheduler.consumer:SlotScheduler.schedule", "declare it there"),   # imported into the module
    ("runtime.scheduler.consumer", "not module:Qualified.function"),
])
def test_a_site_naming_no_function_of_its_module_is_refused(site: str, why: str) -> None:
    with pytest.raises(UnresolvedSite, match=why):
        _resolve(site)


def test_a_call_moved_out_of_its_declared_site_is_caught() -> None:
    [(site, method)] = {(c.site, c.method) for c in cloud_calls.GCP_CALLS if c.site.endswith("Consumer._open")}
    assert _makes_call(site, method)
    # The same call declared on a sibling method that does not make it: what a moved call leaves behind.
    assert not _makes_call(site.replace("Consumer._open", "Consumer.stop"), method)


@pytest.mark.parametrize("module_name", sorted({*cloud_calls.CLIENT_SITES, *cloud_calls.NO_CLIENT_CALLS,
                                                 *cloud_calls.CALLER_PACKAGES}))
def test_every_module_the_registry_names_exists(module_name: str) -> None:
    assert importlib.util.find_spec(module_name) is not None, \
        f"{module_name} (components/review/cloud_calls.py) is gone"


def _qualified_functions(module: object) -> Iterator[tuple[str, ast.AST]]:
    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield f"{prefix}{child.name}", child

    yield from walk(tree, "")


@pytest.mark.parametrize("module_name", sorted(cloud_calls.CLIENT_SITES))
def test_every_client_call_of_the_image_is_declared(module_name: str) -> None:
    module = importlib.import_module(module_name)
    found = {
        (f"{module_name}:{qualname}", method)
        for qualname, function in _qualified_functions(module)
        for method in _client_calls(function, cloud_calls.CLIENT_SITES[module_name])
    }
    assert found, f"{module_name} calls no client: move it to NO_CLIENT_CALLS"
    assert found <= set(DECLARED), f"undeclared cloud calls: {sorted(found - set(DECLARED))}"


def _image_modules() -> Iterator[str]:
    for package in cloud_calls.CALLER_PACKAGES:
        yield package
        path = REPO_ROOT.joinpath(*package.split("."))
        for info in pkgutil.walk_packages([str(path)], prefix=f"{package}."):
            yield info.name


def _imports_cloud_library(module_name: str) -> bool:
    spec = importlib.util.find_spec(module_name)
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    names += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    return any(name == lib or name.startswith(f"{lib}.") for name in names for lib in CLOUD_LIBRARIES)


def test_every_module_with_a_cloud_library_is_accounted_for() -> None:
    with_library = {name for name in _image_modules() if _imports_cloud_library(name)}
    accounted = set(cloud_calls.CLIENT_SITES) | set(cloud_calls.NO_CLIENT_CALLS)

    assert with_library - accounted == set(), "declare their calls in components/review/cloud_calls.py"
    assert set(cloud_calls.NO_CLIENT_CALLS) - with_library == set(), "stale entries in components/review/cloud_calls.py"


def test_every_role_the_proof_relies_on_has_a_source() -> None:
    granted = {role for spec in contract.SERVICE_ACCOUNTS for role in spec.roles}
    granted |= {grant.role for grant in contract.SCOPED_GRANTS}
    assert granted <= iam_permissions.ROLE_PERMISSIONS.keys()
    assert all(iam_permissions.source_of(role).startswith(iam_permissions.REFERENCE)
               for role in iam_permissions.ROLE_PERMISSIONS)


_TOPIC_MEMBER = "gcp:pubsub/topicIAMMember:TopicIAMMember"


def _publisher_on(project: str, member: str, topic: str | None) -> Resource:
    """``roles/pubsub.publisher`` for ``member`` on ``topic``, or on the project when ``topic`` is None."""
    if topic is None:
        return Resource("gcp:projects/iAMMember:IAMMember", "planted",
                        {"project": project, "role": "roles/pubsub.publisher", "member": member})
    return Resource(_TOPIC_MEMBER, "planted", {"project": project, "topic": topic, "role": "roles/pubsub.publisher",
                                               "member": member})


def test_the_old_project_wide_publisher_of_the_scheduler_fails(rendered: tuple[list[Resource], str]) -> None:
    # issue #35: with pubsub.publisher on the project the scheduler (or anyone holding it) could publish to the
    # dead-letter topic, whose messages the leader answers
    resources, project = rendered
    member = _member(contract.SCHEDULER_SERVICE_ACCOUNT, project)
    proof = prove([*resources, _publisher_on(project, member, None)], project)

    assert proof.wider == (
        "gpu-scheduler holds roles/pubsub.publisher on the whole project, but its calls need it only on topic: "
        "bind it there",
        f"{member} may publish to every topic of the project, {contract.REQUEST_DLQ_TOPIC}, "
        f"{contract.RESULT_TOPIC} included: bind a publisher on the topic it publishes to")


@pytest.mark.parametrize("topic", [contract.REQUEST_DLQ_TOPIC, contract.RESULT_TOPIC])
def test_a_user_who_may_publish_to_the_dead_letter_or_result_topic_fails(
        rendered: tuple[list[Resource], str], topic: str) -> None:
    resources, project = rendered
    proof = prove([*resources, _publisher_on(project, "group:risk-desk@example.com", topic)], project)

    only = "the Pub/Sub service agent" if topic == contract.REQUEST_DLQ_TOPIC else "gpu-scheduler"
    assert proof.wider == (f"group:risk-desk@example.com may publish to {topic}, where only {only} may",)


def test_a_member_the_config_does_not_name_may_not_publish_requests(rendered: tuple[list[Resource], str]) -> None:
    # issue #45: a job's queue is who sent it, so only a queue's declared publishers may publish to its topic
    resources, project = rendered
    proof = prove([*resources, _publisher_on(project, "group:risk-desk@example.com", contract.REQUEST_TOPIC)],
                  project)

    assert proof.wider == ("group:risk-desk@example.com may publish to queue topic gpu-job-request, but the stack's "
                           "config does not name it among that queue's publishers",)


_RATES, _CREDIT = "group:gpu-rates-desk@impulse-risk.com", "gpu-job-request-credit-desk"


def test_a_desk_granted_on_another_desks_topic_fails(rendered: tuple[list[Resource], str]) -> None:
    """issue #45: the rates desk publishing to the credit desk's topic could pass its jobs off as credit's."""
    resources, project = rendered
    proof = prove([*resources, _publisher_on(project, _RATES, _CREDIT)], project)

    assert proof.wider == (f"{_RATES} may publish to queue topic {_CREDIT}, but the stack's config does not name it "
                           "among that queue's publishers",)


def test_each_desk_publishes_to_its_own_topic_and_the_scheduler_consumes_every_queue(
        rendered: tuple[list[Resource], str]) -> None:
    resources, project = rendered
    proof = prove(resources, project)
    subscriptions = {r.props["name"] for r in resources if r.type == "gcp:pubsub/subscription:Subscription"}
    queue_subscriptions = {s for s in subscriptions if s.startswith(contract.REQUEST_TOPIC)
                           and s not in (contract.REQUEST_DLQ_SUBSCRIPTION,)}
    consumed = {line.split(" on subscription ")[1].split(" via ")[0] for line in proof.proven
                if line.startswith("runtime.scheduler.consumer:Consumer._open subscribe")}

    assert {contract.REQUEST_SUBSCRIPTION, contract.URGENT_REQUEST_SUBSCRIPTION, f"{_CREDIT}-sub",
            "gpu-job-request-rates-desk-sub"} <= consumed
    assert consumed - {contract.PROBE_SUBSCRIPTION} == queue_subscriptions
    publishers = {(r.props["topic"], r.props["member"]) for r in resources
                  if r.type == _TOPIC_MEMBER and r.props["member"].startswith("group:")}
    assert ("gpu-job-request-rates-desk", _RATES) in publishers
    assert not [topic for topic, member in publishers if member == _RATES and topic != "gpu-job-request-rates-desk"]


def test_without_the_schedulers_grant_on_a_desk_subscription_the_proof_fails(
        rendered: tuple[list[Resource], str]) -> None:
    resources, project = rendered
    proof = prove(_without(resources, lambda r: r.type == "gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember"
                           and r.props.get("subscription") == f"{_CREDIT}-sub"
                           and r.props.get("member") == _member(contract.SCHEDULER_SERVICE_ACCOUNT, project)),
                  project)

    assert proof.missing == (
        f"gpu-scheduler lacks pubsub.subscriptions.consume on subscription {_CREDIT}-sub, needed by "
        "runtime.scheduler.consumer:Consumer._open (subscribe: streaming pull of job requests (pull, ack, modify "
        "deadline) of queue credit-desk)",)


def test_a_declared_desk_publisher_without_its_binding_fails(rendered: tuple[list[Resource], str]) -> None:
    resources, project = rendered
    proof = prove(_without(resources, lambda r: r.type == _TOPIC_MEMBER and r.props.get("member") == _RATES),
                  project)

    assert proof.missing == (f"{_RATES} is declared a publisher of queue topic gpu-job-request-rates-desk but holds "
                             f"no {contract.REQUEST_PUBLISHER_ROLE} there",)


def test_without_the_service_agents_publisher_on_the_dead_letter_topic_the_proof_fails(
        rendered: tuple[list[Resource], str]) -> None:
    resources, project = rendered
    proof = prove(_without(resources, lambda r: r.type == _TOPIC_MEMBER and "gcp-sa-pubsub" in str(
        r.props.get("member"))), project)

    assert proof.missing == (f"the Pub/Sub service agent may not publish to {contract.REQUEST_DLQ_TOPIC}: "
                             "dead-lettering would do nothing",)
