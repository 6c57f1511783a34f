"""``SchedulerWorkload``: the gpu-scheduler service in namespace ``gpu-runtime``.

Namespace, Workload Identity service account, RBAC (leader Lease; Dask worker-group scaling in
``compute``, and ProvisioningRequests there when a pool is queued), the control-token Secret, Deployment,
Service, PodDisruptionBudget and NetworkPolicies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi

from components.k8s_objects import apply_manifest
from runtime.manifests import common, network
from runtime.manifests import scheduler as manifests
from runtime.protocol import contract
from runtime.protocol.queues import BUILT_IN_QUEUES, QueueSpec

TYPE = "gpu-runtime:scheduler_workload:SchedulerWorkload"


@dataclass
class SchedulerWorkloadArgs:
    """Inputs of the gpu-scheduler workload."""

    project: pulumi.Input[str]
    """GCP project of the Pub/Sub topics and subscriptions."""
    image: pulumi.Input[str]
    """Scheduler image reference."""
    result_store: pulumi.Input[str]
    """Result store URL, e.g. ``gs://<bucket>/results``."""
    scheduler_service_account_email: pulumi.Input[str]
    """Google service account the pods impersonate (``gpu-scheduler``, Workload Identity)."""
    control_token: pulumi.Input[str]
    """Bearer token of the control API; pass a Pulumi secret (``pulumi config set --secret``)."""
    replicas: int = 2
    """Scheduler replicas (all consume; one leads)."""
    resources: common.Resources = manifests.DEFAULT_RESOURCES
    """Container requests and limits."""
    extra_env: Mapping[str, str] = field(default_factory=dict)
    """Further ``GPURT_*`` settings, e.g. ``GPURT_LOG_LEVEL``."""
    vertex: manifests.VertexRouting | None = None
    """Job types routed to Vertex AI custom jobs (run as ``gpu-runtime``, whose
    ``roles/iam.serviceAccountUser`` the scheduler then holds); None: no Vertex AI call is made."""
    compute_namespace: pulumi.Input[str] = contract.COMPUTE_NAMESPACE
    """Namespace of the Dask cluster; pass ``DaskCluster.namespace`` so the pool-scaling Role waits for it."""
    queued_pools: Mapping[str, int | None] = field(default_factory=dict)
    """Pools with queued provisioning and their requests' maxRunDurationSeconds; with any, the scheduler is
    told which (``GPURT_QUEUED_POOLS``) and may create and delete ProvisioningRequests in ``compute``."""
    queues: tuple[QueueSpec, ...] = BUILT_IN_QUEUES
    """The stack's request queues (``StackConfig.queue_specs()``), which the scheduler consumes and shares its
    slots between (``GPURT_QUEUES``)."""


class SchedulerWorkload(pulumi.ComponentResource):
    """Everything the gpu-scheduler needs inside the cluster."""

    namespace: pulumi.Output[str]
    """Namespace ``gpu-runtime``."""
    deployment_name: pulumi.Output[str]
    """Name of the Deployment (for ``kubectl rollout``)."""
    service_url: pulumi.Output[str]
    """In-cluster URL of the HTTP API."""

    def __init__(self, name: str, args: SchedulerWorkloadArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TYPE, name, None, opts)
        spec = manifests.SchedulerSpec(
            project=args.project,  # Outputs: builders place them, never inspect them
            image=args.image,
            result_store=args.result_store,
            replicas=args.replicas,
            resources=args.resources,
            extra_env=dict(args.extra_env),
            vertex=args.vertex,
            queued_pools=dict(args.queued_pools),
            queues=args.queues,
        )
        ns = apply_manifest(name, common.namespace(contract.RUNTIME_NAMESPACE), pulumi.ResourceOptions(parent=self))
        in_ns = pulumi.ResourceOptions(parent=self, depends_on=[ns])
        account = apply_manifest(name, manifests.build_service_account(args.scheduler_service_account_email), in_ns)
        secret = apply_manifest(
            name,
            manifests.build_control_token_secret(pulumi.Output.secret(args.control_token)),
            in_ns,
        )
        # Given DaskCluster.namespace (an Output), the pool-scaling Role waits for that namespace to exist.
        rbac = [apply_manifest(name, manifest, in_ns)
                for manifest in manifests.build_rbac(args.compute_namespace, bool(args.queued_pools))]
        for policy in network.build_runtime_policies():
            apply_manifest(name, policy, in_ns)
        # The replicas write its data (the maintenance mode and their reports): a deploy never resets a drain.
        modes = apply_manifest(name, manifests.build_maintenance_config_map(), pulumi.ResourceOptions.merge(
            in_ns, pulumi.ResourceOptions(ignore_changes=["data"])))
        deployment = apply_manifest(
            name,
            manifests.build_deployment(spec),
            pulumi.ResourceOptions(parent=self, depends_on=[ns, account, secret, modes, *rbac]),
        )
        service = apply_manifest(name, manifests.build_service(), in_ns)
        apply_manifest(name, manifests.build_pod_disruption_budget(), in_ns)

        self.namespace = ns.metadata.apply(lambda meta: meta["name"])
        self.deployment_name = deployment.metadata.apply(lambda meta: meta["name"])
        self.service_url = service.id.apply(lambda _: contract.SCHEDULER_URL)
        self.register_outputs(
            {
                "namespace": self.namespace,
                "deployment_name": self.deployment_name,
                "service_url": self.service_url,
                "service_account": account.metadata.apply(lambda meta: meta["name"]),
            }
        )
