"""Prove that CI's deploy and preview accounts hold what ``pulumi up`` / ``pulumi preview`` need, and no more.

The workloads' proof (``components.review.iam_proof``) starts from the code's calls; here the calls are the Pulumi
engine's, so the needs come from the rendered main stack: every resource type it declares must be created,
read, updated and deleted by the deploy account (``MANAGE``), which also pushes the images, reads what the
program looks up and runs ``gpurt validate`` (the ``OPERATOR`` calls of ``components.review.cloud_calls``). The preview
account reads what the program looks up and connects to the cluster; inside the cluster it holds only RBAC
(``components.ci_access``), proven against every Kubernetes object of the stack.

Grants come from the rendered bootstrap stack (project roles, the registry, actAs on the nodes' account) and,
for the preview's RBAC, from the rendered main stack. Each need must be granted; each grant must serve a need;
a used grant wider than its needs (a project role for registry-only needs) fails as in the workloads' proof.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from components.bootstrap import (
    DEPLOY_ACCOUNT_ID,
    GRANTS_ATTRIBUTE,
    NODE_ACCOUNT_ID,
    PREVIEW_ACCOUNT_ID,
    PROJECT_IAM_ADMIN_ROLE,
    account_email,
)
from components.rendered import Resource, lookup
from components.review import cloud_calls
from components.review.cloud_calls import Target, Workload
from components.review.iam_permissions import ROLE_PERMISSIONS
from components.review.iam_proof import Grant, Proof, grants
from runtime.protocol import contract

HELM_RELEASE: Final = "kubernetes:helm.sh/v3:Release"
PROJECT_IAM_MEMBER: Final = "gcp:projects/iAMMember:IAMMember"
CLUSTER_ROLE_BINDING: Final = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
CLUSTER_ROLE: Final = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
ROLE_BINDING: Final = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
ROLE: Final = "kubernetes:rbac.authorization.k8s.io/v1:Role"
_CRUD: Final = ("create", "get", "update", "delete")


def _crud(family: str) -> tuple[str, ...]:
    return tuple(f"{family}.{verb}" for verb in _CRUD)


def _iam_policy(family: str) -> tuple[str, ...]:
    return (f"{family}.getIamPolicy", f"{family}.setIamPolicy")


# What the deploy account needs on the project to manage each GCP resource type of the main stack.
MANAGE: Final[Mapping[str, tuple[str, ...]]] = {
    "gcp:projects/service:Service": ("serviceusage.services.enable", "serviceusage.services.get"),
    "gcp:projects/serviceIdentity:ServiceIdentity": ("serviceusage.services.use",),
    "gcp:pubsub/topic:Topic": _crud("pubsub.topics"),
    "gcp:pubsub/subscription:Subscription": (*_crud("pubsub.subscriptions"), "pubsub.topics.attachSubscription"),
    "gcp:pubsub/topicIAMMember:TopicIAMMember": _iam_policy("pubsub.topics"),
    "gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember": _iam_policy("pubsub.subscriptions"),
    "gcp:storage/bucket:Bucket": _crud("storage.buckets"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": _iam_policy("storage.buckets"),
    "gcp:compute/network:Network": _crud("compute.networks"),
    "gcp:compute/subnetwork:Subnetwork": _crud("compute.subnetworks"),
    "gcp:compute/router:Router": _crud("compute.routers"),
    "gcp:compute/routerNat:RouterNat": ("compute.routers.get", "compute.routers.update"),
    "gcp:container/cluster:Cluster": (*_crud("container.clusters"), "container.operations.get"),
    "gcp:container/nodePool:NodePool": ("container.clusters.update", "container.operations.get"),
    "gcp:serviceaccount/account:Account": _crud("iam.serviceAccounts"),
    "gcp:serviceaccount/iAMMember:IAMMember": _iam_policy("iam.serviceAccounts"),
    "gcp:projects/iAMMember:IAMMember": _iam_policy("resourcemanager.projects"),
}
# Resource types whose VMs run as the nodes' account: creating them needs actAs on it (and on no other account).
RUNS_AS_NODES: Final = frozenset({"gcp:container/cluster:Cluster", "gcp:container/nodePool:NodePool"})
# GKE's IAM name (container.<plural>) of each Kubernetes kind, for the deploy account, whose Kubernetes rights
# are IAM; a custom resource's is container.thirdPartyObjects. Helm's release is its Secrets and the chart's kinds.
K8S_IAM: Final[Mapping[str, str]] = {
    "Namespace": "namespaces",
    "ServiceAccount": "serviceAccounts",
    "ConfigMap": "configMaps",
    "Service": "services",
    "Secret": "secrets",
    "Deployment": "deployments",
    "DaemonSet": "daemonSets",
    "PodDisruptionBudget": "podDisruptionBudgets",
    "NetworkPolicy": "networkPolicies",
    "Role": "roles",
    "RoleBinding": "roleBindings",
    "ClusterRole": "clusterRoles",
    "ClusterRoleBinding": "clusterRoleBindings",
    "CustomResourceDefinition": "customResourceDefinitions",
}
# The dask-kubernetes chart's own objects (its templates), which the release creates with the deploy's rights.
HELM_CHART_KINDS: Final = ("Secret", "ServiceAccount", "Deployment", "ClusterRole", "ClusterRoleBinding")
# RBAC (the preview's only rights in the cluster): the plural resource of each kind, per API group.
K8S_RBAC: Final[Mapping[str, tuple[str, str]]] = {
    "Namespace": ("", "namespaces"),
    "ServiceAccount": ("", "serviceaccounts"),
    "ConfigMap": ("", "configmaps"),
    "Service": ("", "services"),
    "Secret": ("", "secrets"),
    "Deployment": ("apps", "deployments"),
    "DaemonSet": ("apps", "daemonsets"),
    "PodDisruptionBudget": ("policy", "poddisruptionbudgets"),
    "NetworkPolicy": ("networking.k8s.io", "networkpolicies"),
    "Role": ("rbac.authorization.k8s.io", "roles"),
    "RoleBinding": ("rbac.authorization.k8s.io", "rolebindings"),
    "ClusterRole": ("rbac.authorization.k8s.io", "clusterroles"),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io", "clusterrolebindings"),
    "CustomResourceDefinition": ("apiextensions.k8s.io", "customresourcedefinitions"),
    "DaskCluster": ("kubernetes.dask.org", "daskclusters"),
    "DaskWorkerGroup": ("kubernetes.dask.org", "daskworkergroups"),
    "DaskAutoscaler": ("kubernetes.dask.org", "daskautoscalers"),
    "ClusterPodMonitoring": ("monitoring.googleapis.com", "clusterpodmonitorings"),
    "ClusterRules": ("monitoring.googleapis.com", "clusterrules"),
}
# RBAC refuses to write a role granting more than the writer holds unless it may escalate (roles) and bind.
_RBAC_ESCALATION: Final = {
    "Role": "roles",
    "RoleBinding": "roles",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterroles",
}


@dataclass(frozen=True)
class Need:
    """``permission`` on ``(target, name)``, needed by ``who`` for ``why``."""

    account: str
    permission: str
    target: Target
    name: str
    why: str


def _kind(resource_type: str) -> str:
    return resource_type.rsplit(":", 1)[-1]


def deploy_needs(main: Sequence[Resource]) -> tuple[list[Need], list[str]]:
    """What ``pulumi up`` of ``main``, the image push and ``gpurt validate`` need; and types nobody mapped."""
    needs: list[Need] = []
    unknown: list[str] = []
    d = DEPLOY_ACCOUNT_ID
    for resource_type in sorted({r.type for r in main if r.custom}):
        kind = _kind(resource_type)
        if resource_type.startswith("pulumi:providers:"):
            continue  # a provider is the engine's, not a cloud resource
        if resource_type in MANAGE:
            needs += [Need(d, p, Target.PROJECT, "", f"manages {kind}") for p in MANAGE[resource_type]]
            if resource_type in RUNS_AS_NODES:
                needs.append(
                    Need(
                        d,
                        "iam.serviceAccounts.actAs",
                        Target.SERVICE_ACCOUNT,
                        NODE_ACCOUNT_ID,
                        f"a {kind} runs as the nodes' account",
                    )
                )
        elif resource_type == HELM_RELEASE:
            needs += [
                Need(d, f"container.{K8S_IAM[k]}.{verb}", Target.PROJECT, "", f"the Helm release's {k}")
                for k in HELM_CHART_KINDS
                for verb in _CRUD
            ]
        elif resource_type.startswith("kubernetes:"):
            plural = K8S_IAM.get(kind, "thirdPartyObjects")
            needs += [Need(d, f"container.{plural}.{verb}", Target.PROJECT, "", f"applies {kind}") for verb in _CRUD]
            if kind in _RBAC_ESCALATION:
                family = "clusterRoles" if _RBAC_ESCALATION[kind] == "clusterroles" else "roles"
                needs += [
                    Need(d, f"container.{family}.{verb}", Target.PROJECT, "", f"writes {kind} (RBAC)")
                    for verb in ("escalate", "bind")
                ]
        else:
            unknown.append(f"no permission list for {resource_type} in components/review/ci_proof.py (MANAGE)")
    needs += _reads_and_connects(d, main)
    needs.append(Need(d, "serviceusage.services.list", Target.PROJECT, "", "lists the APIs (gpurt bootstrap --check)"))
    # gpurt bootstrap --check's other gcloud calls: the project's billing (Cloud Billing's getBillingInfo asks for
    # resourcemanager.projects.get, https://cloud.google.com/billing/docs/reference/rest/v1/projects/getBillingInfo)
    # and Compute Engine's regional and global quotas (regions.get, projects.get).
    needs += [Need(d, p, Target.PROJECT, "", f"reads {what} (gpurt bootstrap --check)") for p, what in (
        ("resourcemanager.projects.get", "the project's billing"), ("compute.regions.get", "the region's quotas"),
        ("compute.projects.get", "the project's global quotas"))]
    needs += [
        Need(d, p, Target.REGISTRY, "", "pushes the images (deploy workflow)")
        for p in ("artifactregistry.repositories.uploadArtifacts", "artifactregistry.repositories.downloadArtifacts")
    ]
    needs += [
        Need(d, p, call.target, "", f"{call.site} ({call.why or call.method})")
        for call in cloud_calls.GCP_CALLS
        if call.workload is Workload.OPERATOR
        for p in call.permissions
    ]
    return needs, unknown


def _reads_and_connects(account: str, main: Sequence[Resource]) -> list[Need]:
    """What both CI accounts need to run the program at all: its lookups and the cluster's DNS endpoint."""
    reads = [
        Need(account, "artifactregistry.repositories.get", Target.REGISTRY, "", "the program reads the registry"),
        Need(account, "iam.serviceAccounts.get", Target.PROJECT, "", "the program reads the nodes' account"),
    ]
    if any(r.type.startswith("kubernetes:") for r in main):
        reads += [
            Need(account, p, Target.PROJECT, "", "the Kubernetes provider reaches the cluster's DNS endpoint")
            for p in ("container.clusters.get", "container.clusters.connect")
        ]
    return reads


def preview_needs(main: Sequence[Resource]) -> list[Need]:
    """What ``pulumi preview`` of ``main`` needs from IAM (its Kubernetes rights are RBAC: ``prove_preview_rbac``)."""
    return _reads_and_connects(PREVIEW_ACCOUNT_ID, main)


def _holds(role: str, permission: str) -> bool:
    return permission in ROLE_PERMISSIONS.get(role, frozenset())


def _covers(grant: Grant, need: Need) -> bool:
    # The registry is the bootstrap's one repository: a grant on it covers every registry need.
    return (
        grant.target is Target.PROJECT
        or (grant.target is need.target and grant.name in ("", need.name))
        or (grant.target is need.target is Target.REGISTRY)
    )


def prove_ci(main: Sequence[Resource], bootstrap: Sequence[Resource], project: str) -> Proof:
    """Every need of both CI accounts granted by the bootstrap, every grant needed, none wider than its needs."""
    main = [r for r in main if r.custom]
    deploy, unknown = deploy_needs(main)
    needs = deploy + preview_needs(main)
    members = {f"serviceAccount:{account_email(a, project)}": a for a in (DEPLOY_ACCOUNT_ID, PREVIEW_ACCOUNT_ID)}
    granted = [g for g in grants(bootstrap, project) if g.member in members]
    missing = list(unknown) + [
        f"role {role} has no permission list in components/review/iam_permissions.py"
        for role in sorted({g.role for g in granted} - ROLE_PERMISSIONS.keys())
    ]
    proven: list[str] = []
    used: dict[Grant, set[str]] = {}
    for need in needs:
        allowing = [
            g
            for g in granted
            if members[g.member] == need.account and _covers(g, need) and _holds(g.role, need.permission)
        ]
        where = f"{need.target.value} {need.name}".strip()
        if not allowing:
            missing.append(f"{need.account} lacks {need.permission} on {where}, needed because it {need.why}")
            continue
        proven.append(f"{need.account}: {need.permission} on {where} via {', '.join(sorted(g.role for g in allowing))}")
        for grant in allowing:
            used.setdefault(grant, set()).add(need.permission)
    unused = [
        f"{members[g.member]} holds {g.role} on {f'{g.target.value} {g.name}'.strip()}, which nothing needs"
        for g in granted
        if g not in used
    ]
    wider = []
    for grant, permissions in used.items():
        targets = {n.target for n in needs if n.account == members[grant.member] and n.permission in permissions}
        if grant.target is Target.PROJECT and targets and targets <= {Target.REGISTRY, Target.SERVICE_ACCOUNT}:
            wider.append(
                f"{members[grant.member]} holds {grant.role} on the whole project, but needs it only on "
                f"{', '.join(sorted(t.value for t in targets))}: bind it there"
            )
    missing_rbac, unused_rbac, proven_rbac = prove_preview_rbac(main, account_email(PREVIEW_ACCOUNT_ID, project))
    missing_limit, unused_limit = prove_grant_limit(main, bootstrap, project)
    return Proof(
        tuple(missing + missing_rbac + missing_limit), tuple(unused + unused_rbac + unused_limit),
        tuple(proven + proven_rbac), (), tuple(wider)
    )


_HAS_ONLY: Final = re.compile(
    rf"^api\.getAttribute\('{re.escape(GRANTS_ATTRIBUTE)}', \[\]\)\.hasOnly\(\[(?P<roles>[^\]]*)\]\)$")


def prove_grant_limit(main: Sequence[Resource], bootstrap: Sequence[Resource], project: str) -> tuple[list[str],
                                                                                                     list[str]]:
    """The deploy account's project IAM admin is conditioned to the roles the main stack grants on the project:
    every one of them allowed (else ``pulumi up`` is refused), and none it never grants (else the deploy account,
    which runs pull-request-approved code, could hand out more). Returns (missing, unused)."""
    deploy = f"serviceAccount:{account_email(DEPLOY_ACCOUNT_ID, project)}"
    [binding] = [r for r in bootstrap if r.type == PROJECT_IAM_MEMBER and lookup(r.props, "member") == deploy
                 and lookup(r.props, "role") == PROJECT_IAM_ADMIN_ROLE] or [None]
    if binding is None:
        return [], []
    expression = str(lookup(binding.props, "condition", "expression") or "")
    limit = _HAS_ONLY.match(expression)
    if limit is None:
        return [f"{DEPLOY_ACCOUNT_ID} holds {PROJECT_IAM_ADMIN_ROLE} without a condition limiting the roles it may "
                f"grant ({GRANTS_ATTRIBUTE} hasOnly): it could grant any role, owner included"], []
    allowed = {r.strip().strip("'\"") for r in limit["roles"].split(",") if r.strip()}
    granted = {str(lookup(r.props, "role")) for r in main if r.type == PROJECT_IAM_MEMBER}
    vertex_only = {g.role for g in contract.SCOPED_GRANTS if g.vertex_only}  # granted by a stack routing there
    return ([f"the main stack grants {role} on the project, which {DEPLOY_ACCOUNT_ID}'s condition does not allow"
             for role in sorted(granted - allowed)],
            [f"{DEPLOY_ACCOUNT_ID} may grant {role} on the project, which the main stack never grants"
             for role in sorted(allowed - granted - vertex_only)])


@dataclass(frozen=True)
class _Rule:
    role: str
    namespace: str  # "" for a ClusterRole
    rule: Mapping[str, Any]

    def allows(self, group: str, resource: str, verb: str, namespace: str, name: str) -> bool:
        names = self.rule.get("resourceNames") or []
        return (
            group in (self.rule.get("apiGroups") or [])
            and resource in (self.rule.get("resources") or [])
            and verb in (self.rule.get("verbs") or [])
            and (not names or name in names)
            and self.namespace in ("", namespace)
        )


def _bound_rules(main: Iterable[Resource], user: str) -> list[_Rule]:
    """Every rule of every Role and ClusterRole bound to the Kubernetes ``User`` ``user``."""
    main = list(main)
    roles = {
        (r.type, lookup(r.props, "metadata", "namespace") or "", lookup(r.props, "metadata", "name")): r.props
        for r in main
        if r.type in (ROLE, CLUSTER_ROLE)
    }
    found = []
    for binding in (r for r in main if r.type in (ROLE_BINDING, CLUSTER_ROLE_BINDING)):
        if not any(s.get("kind") == "User" and s.get("name") == user for s in binding.props.get("subjects") or []):
            continue
        namespace = lookup(binding.props, "metadata", "namespace") or ""
        kind = lookup(binding.props, "roleRef", "kind")
        key = (
            (CLUSTER_ROLE, "", lookup(binding.props, "roleRef", "name"))
            if kind == "ClusterRole"
            else (ROLE, namespace, lookup(binding.props, "roleRef", "name"))
        )
        role = roles.get(key)
        role_name = f"{kind} {key[2]}"
        found += [_Rule(role_name, namespace, rule) for rule in (role or {}).get("rules") or []]
    return found


def _preview_k8s_needs(main: Sequence[Resource]) -> list[tuple[str, str, str, str, str, str]]:
    """(group, resource, verb, namespace, name, why) of ``pulumi preview`` for every object of ``main``: a read of
    the live object, and for a CRD the dry-run PUT that changes it (components.ci_access says why no more)."""
    needs = []
    for resource in main:
        if resource.type == HELM_RELEASE:
            namespace = str(lookup(resource.props, "namespace") or "")
            needs += [
                ("", "secrets", verb, namespace, "", f"Helm release {resource.name}'s state")
                for verb in ("get", "list")
            ]
            continue
        if not resource.type.startswith("kubernetes:"):
            continue
        kind = _kind(resource.type)
        if kind == "Secret":  # previewed from its inputs: a read of the live Secret would hand out its value
            continue
        group, plural = K8S_RBAC.get(kind, ("?", kind.lower()))
        namespace = str(lookup(resource.props, "metadata", "namespace") or "")
        name = str(lookup(resource.props, "metadata", "name") or "")
        needs.append((group, plural, "get", namespace, name, f"read of the live {kind} "
                                                                f"{namespace + '/' if namespace else ''}{name}"))
        if kind == "CustomResourceDefinition":
            needs.append((group, plural, "update", namespace, name, f"dry-run update of CRD {name}"))
    return needs


def _writes(rules: Sequence[_Rule]) -> list[str]:
    """Grants that let pull-request code change the cluster for real (a dry run is authorized as the request):
    any verb but reads, except ``update`` on CRDs by name."""
    reads = {"get", "list", "watch"}
    return [
        f"{r.role} grants {verb} on {res} ({g or 'core'})"
        f"{' in ' + r.namespace if r.namespace else ' cluster-wide'}"
        f"{'' if r.rule.get('resourceNames') else ' on every object'}: pull-request code could use it for real"
        for r in rules
        for g in r.rule.get("apiGroups") or []
        for res in r.rule.get("resources") or []
        for verb in r.rule.get("verbs") or []
        if verb not in reads
        and not (verb == "update" and res == "customresourcedefinitions" and r.rule.get("resourceNames"))
    ]


def prove_preview_rbac(main: Sequence[Resource], user: str) -> tuple[list[str], list[str], list[str]]:
    """The preview's RBAC against every object of ``main``: (missing, unused, proven); a grant that could write
    for real counts as missing too, whether or not a need uses it."""
    rules = _bound_rules(main, user)
    missing, proven = [], []
    used: set[tuple[str, int, str, str, str]] = set()
    for group, resource, verb, namespace, name, why in _preview_k8s_needs(main):
        allowing = [r for r in rules if r.allows(group, resource, verb, namespace, name)]
        if not allowing:
            missing.append(f"{user} may not {verb} {resource} ({group or 'core'}), needed for the {why}")
            continue
        proven.append(f"preview: {verb} {resource} for the {why} via {', '.join(sorted({r.role for r in allowing}))}")
        used.update((r.role, id(r.rule), g, res, verb) for r in allowing for g in (group,) for res in (resource,))
    unused = [
        f"{r.role} grants {verb} on {res} ({g or 'core'}), which no object of the stack needs"
        for r in rules
        for g in r.rule.get("apiGroups") or []
        for res in r.rule.get("resources") or []
        for verb in r.rule.get("verbs") or []
        if (r.role, id(r.rule), g, res, verb) not in used
    ]
    return missing + _writes(rules), unused, proven
