"""Which checks run against which target: the local platform or a deployed stack.

Both lists hold the same checks in the same order; on the local platform the cloud-only ones are
skipped with their reason, so a report from a laptop and one from production read alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from components.review.quotas import QuotaNeed
from runtime.protocol import contract
from runtime.protocol.queues import BUILT_IN_QUEUES, QueueSpec
from validation.adapters.dask_info import DaskInfo
from validation.adapters.iam import ProjectIam, ResourceIam
from validation.adapters.kube import KubeApi
from validation.adapters.pubsub import PubSubAdmin
from validation.adapters.vertex import VertexQuota
from validation.checks import alerts, dask, identity, probe, pubsub, quota, scheduler, vertex
from validation.runner import Check, skip

CLOUD_ONLY = "cloud only: the local platform has no {what}"
# The local emulator is on loopback and hands out a waiting message at once; an empty pull only waits.
LOCAL_PEEK_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class LocalTarget:
    """The local platform's endpoints and a way to tell whether its processes live."""

    pubsub: PubSubAdmin
    api_url: str
    dask: DaskInfo
    processes_alive: Callable[[], tuple[bool, str]]
    rules_yaml: Callable[[], str] | None = None
    probe_timeout_s: float = contract.PROBE_TIMEOUT_S


@dataclass(frozen=True)
class CloudTarget:
    """A deployed stack's clients."""

    project: str
    region: str
    pubsub: PubSubAdmin
    iam: ProjectIam
    kube: KubeApi
    dask: DaskInfo
    vertex: VertexQuota
    quota_needs: Sequence[QuotaNeed] = ()
    """Every quota the deployed pools and the Vertex AI overflow reach at their maxima
    (``components.review.quotas``)."""
    pools_scale_from_zero: bool = False
    rules_yaml: Callable[[], str] | None = None
    resource_iam: ResourceIam | None = None
    routes_to_vertex: bool = False
    """The stack routes job types to Vertex AI (``vertex.jobTypes``), so its Vertex-only grants are expected."""
    rendered_dask: dask.RenderedDask | None = None
    """The DaskAutoscaler and worker groups the deploy renders for the stack's config (``validation.build``)."""
    queues: tuple[QueueSpec, ...] = BUILT_IN_QUEUES
    """The request queues of the stack's config (``validation.build``): their topics and subscriptions are expected."""


def _rules(render: Callable[[], str] | None) -> dict[str, Callable[[], str]]:
    return {"render": render} if render is not None else {}


def local_checks(target: LocalTarget) -> list[Check]:
    """The checklist for ``gpurt validate --local``."""
    return [
        pubsub.topics_exist(target.pubsub),
        pubsub.dlq_subscriptions_exist(target.pubsub),
        pubsub.dlqs_empty(target.pubsub, LOCAL_PEEK_TIMEOUT_S),
        pubsub.subscription_settings(target.pubsub),
        Check("pubsub.service-agent", skip(CLOUD_ONLY.format(what="IAM (the emulator grants everything)"))),
        Check("iam.service-account-roles", skip(CLOUD_ONLY.format(what="service accounts"))),
        scheduler.process_running(target.processes_alive),
        scheduler.health_http(target.api_url),
        probe.probe_round_trip(target.pubsub, target.probe_timeout_s),
        dask.gpu_workers(target.dask, gpu_expected=False),
        Check("dask.autoscaler-bounds", skip(CLOUD_ONLY.format(what="DaskAutoscaler (a LocalCluster)"))),
        Check("vertex.reachable", skip(CLOUD_ONLY.format(what="Vertex AI"))),
        Check("quota.capacity", skip(CLOUD_ONLY.format(what="Compute Engine or Vertex AI quota"))),
        alerts.rules_pass_promtool(**_rules(target.rules_yaml)),
    ]


def cloud_checks(target: CloudTarget) -> list[Check]:
    """The checklist for ``gpurt validate --stack NAME``."""
    return [
        pubsub.topics_exist(target.pubsub, target.queues),
        pubsub.dlq_subscriptions_exist(target.pubsub),
        pubsub.dlqs_empty(target.pubsub),
        pubsub.subscription_settings(target.pubsub, target.queues),
        pubsub.service_agent_grants(target.pubsub, target.iam.project_number, target.queues),
        identity.service_account_roles(target.iam, target.project, target.resource_iam, target.routes_to_vertex),
        scheduler.pods_running(target.kube),
        scheduler.health_pods(target.kube),
        probe.probe_round_trip(target.pubsub),
        dask.gpu_workers(target.dask, gpu_expected=True, scales_from_zero=target.pools_scale_from_zero),
        dask.autoscaler_bounds(target.kube, target.rendered_dask),
        vertex.vertex_reachable(target.vertex, target.region),
        quota.quota_capacity(target.vertex, target.project, target.region, target.quota_needs),
        alerts.rules_in_cluster(target.kube, **_rules(target.rules_yaml)),
    ]
