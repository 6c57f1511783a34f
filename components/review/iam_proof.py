"""Prove from a rendered stack that each workload may make every call it makes, and holds nothing it never uses.

Input: the resources a stack registers (``gpurt plan`` records them under mocks), as (type, props). The
identities are read from them, not assumed: the gpu-scheduler Deployment's Kubernetes service account, the
Google account that account is annotated with *and* bound to through Workload Identity, and the account
the Deployment names for Vertex AI jobs. Grants are every IAM member on the project, the result bucket,
topics, subscriptions and service accounts, expanded into permissions with ``components.review.iam_permissions``;
RBAC is every Role and RoleBinding. Then each ``components.review.cloud_calls`` entry must be covered, and each
grant (role on a resource; RBAC verb on a resource) must cover some call. A call that the code makes only
under a setting (``only_with``: queued pools, Vertex AI routing) counts only where the scheduler's
Deployment turns it on: a stack without queued pools grants nothing for ProvisioningRequests, one that
routes nothing to Vertex AI holds neither ``roles/aiplatform.user`` nor actAs on ``gpu-runtime``. A call made on
every request queue (``per_queue``: the scheduler's consume) counts once per queue its Deployment declares
(``GPURT_QUEUES``), and each queue topic's publishers must be exactly the members the stack's config declares there
(the Pub/Sub component's recorded input): a job's queue is who sent it (docs/infrastructure.md, "Request queues").

A used grant can still be wider than its calls (``Proof.wider``): bound on the project where every call it
serves is on the result bucket or a service account (which the IAM component binds on), or a role where a
narrower predefined role of the permission table covers every call. Workload Identity bindings are checked
too: each must let a Kubernetes account of the stack, annotated with that Google account and run by a pod
of the stack, act as it, and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from components.iam import WORKLOAD_IDENTITY_ROLE, workload_identity_member
from components.pubsub import QUEUE_PUBLISHERS_INPUT
from components.pubsub import TYPE as PUBSUB_COMPONENT
from components.rendered import CLUSTER, DEPLOYMENT, Resource, kubernetes_object, last_segment, lookup
from components.review import cloud_calls
from components.review.cloud_calls import GcpCall, KubeCall, Target, Workload
from components.review.iam_permissions import ROLE_PERMISSIONS
from runtime.protocol import contract, queues

K8S_SERVICE_ACCOUNT: Final = "kubernetes:core/v1:ServiceAccount"
ROLE: Final = "kubernetes:rbac.authorization.k8s.io/v1:Role"
ROLE_BINDING: Final = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
GSA_ANNOTATION: Final = "iam.gke.io/gcp-service-account"
# The scopes the IAM component binds on below the project: a project grant serving only these is too wide.
_NARROWER: Final = frozenset({Target.RESULT_BUCKET, Target.SERVICE_ACCOUNT, Target.TOPIC, Target.SUBSCRIPTION,
                              Target.REGISTRY})
_PUBLISH: Final = "pubsub.topics.publish"
# The Pub/Sub service agent of any project number (contract.PUBSUB_SERVICE_AGENT).
_SERVICE_AGENT_SUFFIX: Final = "@gcp-sa-pubsub.iam.gserviceaccount.com"
# IAM member resource types and the kind of resource each binds on.
_MEMBER_TYPES: Final = {
    "gcp:projects/iAMMember:IAMMember": Target.PROJECT,
    "gcp:storage/bucketIAMMember:BucketIAMMember": Target.RESULT_BUCKET,
    "gcp:pubsub/topicIAMMember:TopicIAMMember": Target.TOPIC,
    "gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember": Target.SUBSCRIPTION,
    "gcp:serviceaccount/iAMMember:IAMMember": Target.SERVICE_ACCOUNT,
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": Target.REGISTRY,
}
_TARGET_FIELDS: Final = {
    Target.RESULT_BUCKET: "bucket", Target.TOPIC: "topic", Target.SUBSCRIPTION: "subscription",
    Target.SERVICE_ACCOUNT: "serviceAccountId", Target.REGISTRY: "repository",
}


@dataclass(frozen=True)
class Grant:
    """``role`` held by ``member`` on a resource (``name`` empty for the project)."""

    member: str
    role: str
    target: Target
    name: str

    def covers(self, target: Target, name: str) -> bool:
        """Whether this binding applies to the resource ``(target, name)``: the project covers everything."""
        return self.target is Target.PROJECT or (self.target is target and self.name == name)


@dataclass(frozen=True)
class Identity:
    """Who a workload runs as: a Google account, and for the scheduler also a Kubernetes account."""

    google_account: str
    kubernetes_account: tuple[str, str] | None = None


@dataclass(frozen=True)
class Proof:
    """The verdict: needs nobody grants, grants nobody needs, and what was proven (one line per call)."""

    missing: tuple[str, ...]
    unused: tuple[str, ...]
    proven: tuple[str, ...]
    not_made: tuple[str, ...] = ()
    """Declared calls this stack's settings switch off (their ``only_with`` is off): needing no grant."""
    wider: tuple[str, ...] = ()
    """Used grants wider than their calls (scope or role), and Workload Identity bindings nothing runs as."""

    @property
    def ok(self) -> bool:
        """True when every call is allowed, every grant used, and none wider than its calls."""
        return not self.missing and not self.unused and not self.wider


def _account_id(member_or_email: str) -> str:
    return member_or_email.removeprefix("serviceAccount:").split("@", 1)[0]


def grants(resources: Iterable[Resource], project: str) -> list[Grant]:
    """Every IAM binding of a Google service account in the stack, on the resource it is bound to."""
    found = []
    for resource in resources:
        target = _MEMBER_TYPES.get(resource.type)
        member = str(lookup(resource.props, "member") or "")
        if target is None or not member.startswith("serviceAccount:") or "[" in member:
            continue  # Workload Identity principals are checked with the identities, not as grants
        name = "" if target is Target.PROJECT else last_segment(lookup(resource.props, _TARGET_FIELDS[target]) or "")
        if target is Target.RESULT_BUCKET:
            name = "" if name == contract.result_bucket(project) else f"other bucket {name}"
        if target is Target.SERVICE_ACCOUNT:
            name = _account_id(name)
        found.append(Grant(member, str(lookup(resource.props, "role")), target, name))
    return found


def _scheduler_pod(resources: list[Resource]) -> Mapping[str, Any] | None:
    """The pod spec of the gpu-scheduler Deployment, or None when the stack has no such Deployment."""
    deployment = kubernetes_object(resources, DEPLOYMENT, contract.SCHEDULER_DEPLOYMENT, contract.RUNTIME_NAMESPACE)
    return None if deployment is None else (deployment.get("spec", "template", "spec") or {})


def _annotated_account(resources: list[Resource], namespace: str, name: str) -> str:
    """The Google account the Kubernetes account ``namespace/name`` is annotated with ('' if none or no account)."""
    account = kubernetes_object(resources, K8S_SERVICE_ACCOUNT, name, namespace)
    return str(account.get("metadata", "annotations", GSA_ANNOTATION) or "") if account else ""


def scheduler_settings(resources: list[Resource]) -> dict[str, str]:
    """The plain environment values of the scheduler Deployment's containers (what turns its calls on)."""
    pod = _scheduler_pod(resources) or {}
    return {str(e.get("name")): str(e.get("value") or "") for c in pod.get("containers") or []
            for e in c.get("env") or [] if "value" in e}


def identities(resources: list[Resource], problems: list[str]) -> dict[Workload, Identity]:
    """The identity of each workload, from the scheduler's Deployment, its account and Workload Identity."""
    pod = _scheduler_pod(resources)
    if pod is None:
        problems.append(f"no Deployment {contract.RUNTIME_NAMESPACE}/{contract.SCHEDULER_DEPLOYMENT}")
        return {}
    ksa = (contract.RUNTIME_NAMESPACE, str(pod.get("serviceAccountName") or "default"))
    email = _annotated_account(resources, *ksa)
    if not email:
        problems.append(f"Kubernetes account {ksa[0]}/{ksa[1]} names no Google account ({GSA_ANNOTATION})")
        return {}
    pools = [lookup(r.props, "workloadIdentityConfig", "workloadPool") for r in resources if r.type == CLUSTER]
    principal = workload_identity_member(str(pools[0]) if pools else "?", *ksa)
    bound = any(
        r.type == "gcp:serviceaccount/iAMMember:IAMMember" and lookup(r.props, "role") == WORKLOAD_IDENTITY_ROLE
        and lookup(r.props, "member") == principal and last_segment(lookup(r.props, "serviceAccountId") or "") == email
        for r in resources
    )
    if not bound:
        problems.append(f"{principal} is not {WORKLOAD_IDENTITY_ROLE} of {email}: the pods cannot act as it")
    found = {Workload.SCHEDULER: Identity(email, ksa)}
    env = {e.get("name"): e.get("value") for c in pod.get("containers") or [] for e in c.get("env") or []}
    if env.get(contract.SchedulerEnv.VERTEX_SERVICE_ACCOUNT):
        found[Workload.VERTEX_TASK] = Identity(str(env[contract.SchedulerEnv.VERTEX_SERVICE_ACCOUNT]))
    return found


def _gcp_needs(call: GcpCall) -> list[tuple[str, Target, str]]:
    return [(permission, call.target, call.name) for permission in call.permissions]


def _allows(grant: Grant, permission: str, target: Target, name: str) -> bool:
    return grant.covers(target, name) and permission in ROLE_PERMISSIONS.get(grant.role, frozenset())


def _rbac(resources: list[Resource]) -> list[tuple[str, str, tuple[str, str], Mapping[str, Any]]]:
    """(namespace, role name, bound Kubernetes account, rule) for every rule of every bound Role."""
    roles = {(lookup(r.props, "metadata", "namespace"), lookup(r.props, "metadata", "name")): r.props
             for r in resources if r.type == ROLE}
    bound = []
    for binding in (r.props for r in resources if r.type == ROLE_BINDING):
        namespace = lookup(binding, "metadata", "namespace")
        role = roles.get((namespace, lookup(binding, "roleRef", "name")))
        if role is None or lookup(binding, "roleRef", "kind") != "Role":
            continue
        for subject in binding.get("subjects") or []:
            if subject.get("kind") == "ServiceAccount":
                account = (str(subject.get("namespace")), str(subject.get("name")))
                bound += [(str(namespace), str(lookup(role, "metadata", "name")), account, rule)
                          for rule in role.get("rules") or []]
    return bound


def _rule_allows(rule: Mapping[str, Any], call: KubeCall) -> bool:
    names = rule.get("resourceNames") or []
    return (call.api_group in (rule.get("apiGroups") or []) and call.resource in (rule.get("resources") or [])
            and call.verb in (rule.get("verbs") or []) and (not names or call.name in names))


def prove(
    resources: Iterable[Resource],
    project: str,
    gcp_calls: tuple[GcpCall, ...] = cloud_calls.GCP_CALLS,
    kube_calls: tuple[KubeCall, ...] = cloud_calls.KUBE_CALLS,
) -> Proof:
    """Check every declared call against the stack's grants, and every grant against the calls.

    ``resources`` may include the components: the Pub/Sub component's recorded input says who the stack
    declares may publish to each queue topic (``components.pubsub.QUEUE_PUBLISHERS_INPUT``).
    """
    resources = list(resources)
    declared = declared_publishers(resources)
    resources = [r for r in resources if r.custom]
    missing: list[str] = []
    proven: list[str] = []
    who = identities(resources, missing)
    accounts = {f"serviceAccount:{spec.email(project)}" for spec in contract.SERVICE_ACCOUNTS}
    granted = [grant for grant in grants(resources, project) if grant.member in accounts]
    unknown_roles = sorted({g.role for g in granted} - ROLE_PERMISSIONS.keys())
    missing += [f"role {role} has no permission list in components/review/iam_permissions.py" for role in unknown_roles]
    used: dict[Grant, list[tuple[str, Target]]] = {}
    settings = scheduler_settings(resources)
    stack_queues = _queues(settings, missing)
    gcp_calls = tuple(made_on for call in gcp_calls for made_on in call.for_queues(stack_queues))
    made = [c for c in (*gcp_calls, *kube_calls) if c.only_with is None or c.only_with.on(settings)]
    not_made = tuple(f"{c.site} {c.method}: not made, {c.only_with}" for c in (*gcp_calls, *kube_calls)
                     if c not in made and c.workload in cloud_calls.STACK_WORKLOADS)
    for call in (c for c in made if isinstance(c, GcpCall) and c.workload in cloud_calls.STACK_WORKLOADS):
        identity = who.get(call.workload)
        if identity is None:
            missing.append(f"{call.site} ({call.method}): workload {call.workload} has no identity in the stack")
            continue
        member = f"serviceAccount:{identity.google_account}"
        for permission, target, name in _gcp_needs(call):
            allowing = [g for g in granted if g.member == member and _allows(g, permission, target, name)]
            where = f"{target.value} {name}".strip()
            if not allowing:
                missing.append(f"{_account_id(member)} lacks {permission} on {where}, needed by {call.site} "
                               f"({call.method}: {call.why})")
            else:
                for grant in allowing:
                    used.setdefault(grant, []).append((permission, target))
                proven.append(f"{call.site} {call.method}: {permission} on {where} via "
                              f"{', '.join(sorted({g.role for g in allowing}))}")
    unused = []
    for grant in granted:
        if grant in used:
            continue
        key = (_account_id(grant.member), grant.role)
        if key not in cloud_calls.CONTRACT_ROLES_WITHOUT_CALLER:
            where = f"{grant.target.value} {grant.name}".strip()
            unused.append(f"{key[0]} holds {grant.role} on {where}, which no declared call needs")
    unused += [f"{account} {role} is listed as without a caller, but a call uses it: drop it from the list"
               for account, role in cloud_calls.CONTRACT_ROLES_WITHOUT_CALLER
               if any(g in used and (_account_id(g.member), g.role) == (account, role) for g in granted)]
    wider = _wider(used) + _workload_identity_wider(resources, project)
    publishers = _topic_publishers(resources, project)
    queue_publishers = _queue_publishers(resources, stack_queues, declared)
    missing += queue_publishers.missing
    wider += queue_publishers.wider
    missing += publishers.missing
    wider += publishers.wider
    missing_rbac, unused_rbac, proven_rbac = _prove_rbac(
        resources, who, tuple(c for c in made if isinstance(c, KubeCall)))
    return Proof(tuple(missing + missing_rbac), tuple(unused + unused_rbac), tuple(proven + proven_rbac), not_made,
                 tuple(wider))


def _wider(used: Mapping[Grant, list[tuple[str, Target]]]) -> list[str]:
    """Used grants bound wider than their calls need: on the project for narrower calls, or a wider role."""
    found = []
    for grant, uses in used.items():
        account = _account_id(grant.member)
        targets = {target for _, target in uses}
        if grant.target is Target.PROJECT and targets <= _NARROWER:
            found.append(f"{account} holds {grant.role} on the whole project, but its calls need it only on "
                         f"{', '.join(sorted(t.value for t in targets))}: bind it there")
        permissions = {permission for permission, _ in uses}
        held = ROLE_PERMISSIONS.get(grant.role, frozenset())
        narrower = sorted(role for role, has in ROLE_PERMISSIONS.items() if has < held and permissions <= has)
        if narrower:
            found.append(f"{account} holds {grant.role}, but {narrower[0]} covers every call it serves "
                         f"({', '.join(sorted(permissions))})")
    return found


@dataclass(frozen=True)
class _Publishers:
    missing: list[str]
    wider: list[str]


def _topic_publishers(resources: list[Resource], project: str) -> _Publishers:
    """Who may publish where, for every member of the stack (people and groups included), not only its accounts.

    A dead letter is answered by the leader, so only the Pub/Sub service agent may publish to a dead-letter
    topic (and it must, or dead-lettering does nothing); results are trusted by readers of the result topic, so
    only gpu-scheduler may publish there. A publisher on the project may publish to both: refused for anyone.
    """
    scheduler = f"serviceAccount:{contract.SCHEDULER_SERVICE_ACCOUNT.email(project)}"
    allowed = {spec.name: "the Pub/Sub service agent" for spec in contract.TOPICS if spec.is_dead_letter}
    allowed[contract.RESULT_TOPIC] = _account_id(scheduler)
    found = _Publishers([], [])
    agent_publishes: set[str] = set()
    for resource in resources:
        target = _MEMBER_TYPES.get(resource.type)
        member = str(lookup(resource.props, "member") or "")
        if target not in (Target.PROJECT, Target.TOPIC) or \
                _PUBLISH not in ROLE_PERMISSIONS.get(str(lookup(resource.props, "role")), frozenset()):
            continue
        topic = "" if target is Target.PROJECT else last_segment(lookup(resource.props, "topic") or "")
        is_agent = member.startswith("serviceAccount:service-") and member.endswith(_SERVICE_AGENT_SUFFIX)
        if target is Target.PROJECT:
            found.wider.append(f"{member} may publish to every topic of the project, {', '.join(sorted(allowed))} "
                               "included: bind a publisher on the topic it publishes to")
        elif topic in allowed and not (is_agent if topic != contract.RESULT_TOPIC else member == scheduler):
            found.wider.append(f"{member} may publish to {topic}, where only {allowed[topic]} may")
        elif is_agent:
            agent_publishes.add(topic)
    found.missing.extend(f"the Pub/Sub service agent may not publish to {topic}: dead-lettering would do nothing"
                         for topic in sorted(set(allowed) - {contract.RESULT_TOPIC} - agent_publishes))
    return found


def declared_publishers(resources: Iterable[Resource]) -> dict[str, frozenset[str]]:
    """Queue topic -> the members the stack's config declares may publish there (the Pub/Sub component's input)."""
    found: dict[str, frozenset[str]] = {}
    for resource in resources:
        if resource.type == PUBSUB_COMPONENT:
            for topic, members in (lookup(resource.props, QUEUE_PUBLISHERS_INPUT) or {}).items():
                found[str(topic)] = found.get(str(topic), frozenset()) | {str(member) for member in members}
    return found


def _queues(settings: Mapping[str, str], problems: list[str]) -> tuple[queues.QueueSpec, ...]:
    """The request queues the scheduler's Deployment declares (``GPURT_QUEUES``; none: the built-in ones)."""
    try:
        return queues.decode(settings.get(contract.SchedulerEnv.QUEUES) or "[]")
    except queues.QueueError as exc:
        problems.append(f"the scheduler's {contract.SchedulerEnv.QUEUES} cannot be read: {exc}")
        return queues.BUILT_IN_QUEUES


def _queue_publishers(resources: list[Resource], stack_queues: Iterable[queues.QueueSpec],
                      declared: Mapping[str, frozenset[str]]) -> _Publishers:
    """Who may publish to each queue's topic, against who the stack's config says may.

    A job's queue is who sent it (docs/scheduler.md, Queues): a member publishing to a desk's topic without being
    among its declared publishers (a desk granted on another desk's topic) could pass its jobs off as that desk's,
    so it fails; a declared publisher without its binding could not submit at all.
    """
    topics = {queue.topic for queue in stack_queues}
    bound: dict[str, set[str]] = {}
    for resource in resources:
        if _MEMBER_TYPES.get(resource.type) is not Target.TOPIC or \
                _PUBLISH not in ROLE_PERMISSIONS.get(str(lookup(resource.props, "role")), frozenset()):
            continue
        topic = last_segment(lookup(resource.props, "topic") or "")
        if topic in topics:
            bound.setdefault(topic, set()).add(str(lookup(resource.props, "member") or ""))
    found = _Publishers([], [])
    for topic in sorted(topics):
        wanted, held = declared.get(topic, frozenset()), bound.get(topic, set())
        found.wider.extend(f"{member} may publish to queue topic {topic}, but the stack's config does not name it "
                           "among that queue's publishers" for member in sorted(held - wanted))
        found.missing.extend(f"{member} is declared a publisher of queue topic {topic} but holds no "
                             f"{contract.REQUEST_PUBLISHER_ROLE} there" for member in sorted(wanted - held))
    return found


def _runs_as(resources: list[Resource]) -> set[tuple[str, str]]:
    """(namespace, Kubernetes account) of every pod template of the stack (Deployments, Dask objects...)."""
    found: set[tuple[str, str]] = set()

    def walk(value: Any, namespace: str) -> None:
        if isinstance(value, Mapping):
            if value.get("serviceAccountName"):
                found.add((namespace, str(value["serviceAccountName"])))
            for item in value.values():
                walk(item, namespace)
        elif isinstance(value, list):
            for item in value:
                walk(item, namespace)

    for resource in resources:
        namespace = lookup(resource.props, "metadata", "namespace")
        if namespace:
            walk(lookup(resource.props, "spec"), str(namespace))
    return found


def _workload_identity_wider(resources: list[Resource], project: str) -> list[str]:
    """Workload Identity bindings on the platform's accounts that let anything but its own pods act as them."""
    pools = {str(lookup(r.props, "workloadIdentityConfig", "workloadPool")) for r in resources if r.type == CLUSTER}
    emails = {spec.email(project) for spec in contract.SERVICE_ACCOUNTS}
    running = _runs_as(resources)
    found = []
    for resource in resources:
        member = str(lookup(resource.props, "member") or "")
        role = lookup(resource.props, "role")
        if resource.type not in _MEMBER_TYPES or ("[" not in member and role != WORKLOAD_IDENTITY_ROLE):
            continue
        email = last_segment(lookup(resource.props, "serviceAccountId") or "")
        if role != WORKLOAD_IDENTITY_ROLE or resource.type != "gcp:serviceaccount/iAMMember:IAMMember":
            # A Kubernetes principal holding a role directly bypasses the accounts the proof checks.
            found.append(f"{member} holds {role} directly; pods get roles only through the platform's accounts")
            continue
        if email not in emails:
            continue
        pool, _, rest = member.removeprefix("serviceAccount:").partition("[")
        namespace, _, name = rest.rstrip("]").partition("/")
        account = kubernetes_object(resources, K8S_SERVICE_ACCOUNT, name, namespace)
        if pool not in pools:
            why = f"its pool {pool or '(none)'} is not the cluster's"
        elif account is None:
            why = "the stack has no such Kubernetes account"
        elif _annotated_account(resources, namespace, name) != email:
            why = f"that account is not annotated {GSA_ANNOTATION}={email}"
        elif (namespace, name) not in running:
            why = "no pod of the stack runs as that account"
        else:
            continue
        found.append(f"{member} may act as {_account_id(email)} through {lookup(resource.props, 'role')}, but {why}")
    return found


def _prove_rbac(
    resources: list[Resource], who: dict[Workload, Identity], calls: tuple[KubeCall, ...]
) -> tuple[list[str], list[str], list[str]]:
    """RBAC for ``calls`` (those this stack's settings make): each allowed by a bound Role, each rule used."""
    rules = _rbac(resources)
    missing, proven = [], []
    used: set[tuple[str, str, str, str, str]] = set()
    for call in (c for c in calls if c.workload in cloud_calls.STACK_WORKLOADS):
        identity = who.get(call.workload)
        account = identity.kubernetes_account if identity else None
        allowing = [(ns, role) for ns, role, subject, rule in rules
                    if subject == account and ns == call.namespace and _rule_allows(rule, call)]
        what = f"{call.verb} {call.resource}{f'/{call.name}' if call.name else ''} in {call.namespace}"
        if not allowing:
            missing.append(f"{account} may not {what}, needed by {call.site} ({call.method})")
            continue
        proven.append(f"{call.site} {call.method}: {what} via Role {', '.join(r for _, r in allowing)}")
        used.update((ns, role, call.api_group, call.resource, call.verb) for ns, role in allowing)
    unused = [
        f"Role {ns}/{role} grants {verb} on {resource} ({group or 'core'}), which no declared call needs"
        for ns, role, _, rule in rules
        for group in rule.get("apiGroups") or []
        for resource in rule.get("resources") or []
        for verb in rule.get("verbs") or []
        if (ns, role, group, resource, verb) not in used
    ]
    return missing, unused, proven
