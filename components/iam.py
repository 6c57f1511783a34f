"""Workload identities: the contract's Google service accounts, their roles, and Workload Identity.

Each ``contract.ServiceAccountSpec`` becomes one service account with exactly its roles (one project
IAM member per role, so nothing else on the project is touched) and a ``roles/iam.workloadIdentityUser``
binding for its Kubernetes service account. Each ``contract.ScopedGrant`` is bound on its own resource
(the result bucket, a topic, a subscription, another service account) or, where nothing narrower exists,
on the project; those only Vertex AI routing needs are bound only by a stack that routes jobs there. Pods
authenticate through the GKE metadata server; no service-account key is ever created.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from runtime.protocol import contract

WORKLOAD_IDENTITY_ROLE = "roles/iam.workloadIdentityUser"
# Least privilege for the nodes' own identity: ship logs and metrics, pull images. Pods never use it
# (Workload Identity gives them their own), so nothing more is granted.
NODE_ROLES = (
    "roles/logging.logWriter",
    "roles/monitoring.metricWriter",
    "roles/monitoring.viewer",
    "roles/stackdriver.resourceMetadata.writer",
    "roles/artifactregistry.reader",
    "roles/autoscaling.metricsWriter",
    # Image streaming with a node account of our own: the account must be a Service Usage Consumer of the
    # project holding the images (https://cloud.google.com/kubernetes-engine/docs/how-to/image-streaming).
    "roles/serviceusage.serviceUsageConsumer",
)


def granted_project_roles() -> tuple[str, ...]:
    """Every role the main program may grant on the project: the nodes' (``components.gke``), each workload
    account's, and the project-scoped grants, those of Vertex AI routing included (the deploy account serves a
    stack whichever way its routing is set). The deploy account's project IAM admin is limited to these."""
    return tuple(sorted({*NODE_ROLES, *(role for spec in contract.SERVICE_ACCOUNTS for role in spec.roles),
                         *(g.role for g in contract.SCOPED_GRANTS if g.scope is contract.GrantScope.PROJECT)}))


def role_suffix(role: str) -> str:
    """A resource-name-safe short form of a role: ``roles/pubsub.subscriber`` -> ``pubsub-subscriber``."""
    return role.removeprefix("roles/").replace(".", "-").lower()


def workload_identity_member(workload_pool: str, namespace: str, k8s_service_account: str) -> str:
    """The IAM member that stands for a Kubernetes service account under Workload Identity."""
    return f"serviceAccount:{workload_pool}[{namespace}/{k8s_service_account}]"


@dataclass
class IdentitiesArgs:
    """Inputs of the identities component."""

    project: pulumi.Input[str]
    """GCP project id."""

    workload_pool: pulumi.Input[str]
    """The cluster's Workload Identity pool (``<project>.svc.id.goog``); taken from the cluster so the
    bindings wait for the pool to exist."""

    result_bucket: pulumi.Input[str]
    """Name of the result bucket; bucket-scoped grants are bound on it."""

    accounts: tuple[contract.ServiceAccountSpec, ...] = field(default=contract.SERVICE_ACCOUNTS)
    """Accounts to create; the contract's by default."""

    vertex: bool = False
    """The scheduler routes jobs to Vertex AI: only then are the contract's Vertex-only grants bound."""

    queue_subscriptions: tuple[str, ...] = ()
    """Every request queue's subscription (``StackConfig.queue_specs()``): the scheduler consumes each."""

    grants: tuple[contract.ScopedGrant, ...] | None = None
    """Resource-scoped grants of those accounts; by default the contract's for this ``vertex`` setting and these
    queues (``contract.scoped_grants``)."""

    topics: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """Topic name -> the topic's name as its resource outputs it (``PubSub.topic_names``), so that a grant on a
    topic waits for the topic; a topic not listed is named as the contract spells it."""

    subscriptions: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    """Subscription name -> the subscription's name as its resource outputs it, likewise."""


class Identities(pulumi.ComponentResource):
    """gpu-scheduler and gpu-runtime service accounts with their roles and Workload Identity bindings."""

    accounts: dict[str, gcp.serviceaccount.Account]
    emails: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: IdentitiesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpu-runtime:iam:Identities", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.accounts = {}
        for spec in args.accounts:
            account = gcp.serviceaccount.Account(
                f"{name}-{spec.account_id}",
                account_id=spec.account_id,
                display_name=spec.display_name,
                project=args.project,
                opts=child,
            )
            self.accounts[spec.account_id] = account
            member = account.email.apply(lambda email: f"serviceAccount:{email}")
            for role in spec.roles:
                gcp.projects.IAMMember(
                    f"{name}-{spec.account_id}-{role_suffix(role)}",
                    project=args.project,
                    role=role,
                    member=member,
                    opts=child,
                )
            gcp.serviceaccount.IAMMember(
                f"{name}-{spec.account_id}-workload-identity",
                service_account_id=account.name,
                role=WORKLOAD_IDENTITY_ROLE,
                member=pulumi.Output.from_input(args.workload_pool).apply(
                    lambda pool, spec=spec: workload_identity_member(
                        pool, spec.k8s_namespace, spec.k8s_service_account
                    )
                ),
                opts=child,
            )
        grants = args.grants if args.grants is not None else contract.scoped_grants(args.vertex,
                                                                                   args.queue_subscriptions)
        for grant in grants:
            self._grant(name, grant, args, child)
        self.emails = {key: account.email for key, account in self.accounts.items()}
        self.register_outputs({"emails": self.emails})

    def _grant(
        self, name: str, grant: contract.ScopedGrant, args: IdentitiesArgs, opts: pulumi.ResourceOptions
    ) -> None:
        member = self.accounts[grant.account_id].email.apply(lambda email: f"serviceAccount:{email}")
        resource_name = f"{name}-{grant.account_id}-{role_suffix(grant.role)}-on-{grant.scope.value}"
        if grant.scope is contract.GrantScope.RESULT_BUCKET:
            gcp.storage.BucketIAMMember(
                resource_name, bucket=args.result_bucket, role=grant.role, member=member, opts=opts
            )
        elif grant.scope is contract.GrantScope.TOPIC:
            gcp.pubsub.TopicIAMMember(resource_name + f"-{grant.target}", project=args.project,
                                      topic=args.topics.get(grant.target, grant.target), role=grant.role,
                                      member=member, opts=opts)
        elif grant.scope is contract.GrantScope.SUBSCRIPTION:
            gcp.pubsub.SubscriptionIAMMember(resource_name + f"-{grant.target}", project=args.project,
                                             subscription=args.subscriptions.get(grant.target, grant.target),
                                             role=grant.role, member=member, opts=opts)
        elif grant.scope is contract.GrantScope.SERVICE_ACCOUNT:
            gcp.serviceaccount.IAMMember(
                resource_name,
                service_account_id=self.accounts[grant.target].name,
                role=grant.role,
                member=member,
                opts=opts,
            )
        else:
            gcp.projects.IAMMember(resource_name, project=args.project, role=grant.role, member=member, opts=opts)
