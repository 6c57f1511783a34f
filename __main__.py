"""The GPU Runtime Pulumi program: read the stack's config, wire the components, export what operators need.

Order matters only where the cloud needs it: APIs before anything that uses them; the cluster before the
Workload Identity bindings (its identity pool must exist); the Kubernetes side through the cluster's
provider. Everything else is in the components.
"""

import pulumi

from components.bootstrap import PREVIEW_ACCOUNT_ID, account_email
from components.ci_access import PreviewAccess, PreviewAccessArgs
from components.config import load_control_token, load_stack_config
from components.dask import DaskCluster, DaskClusterArgs, worker_pools
from components.gke import GkeCluster, GkeClusterArgs
from components.iam import Identities, IdentitiesArgs
from components.lifecycle import lifecycle_options
from components.monitoring import Monitoring, MonitoringArgs
from components.platform_services import PlatformServices, PlatformServicesArgs
from components.pubsub import PubSub, PubSubArgs
from components.scheduler_workload import SchedulerWorkload, SchedulerWorkloadArgs
from runtime.manifests.scheduler import VertexRouting
from runtime.protocol import contract

config = load_stack_config()
control_token = load_control_token()
pulumi.runtime.register_stack_transformation(lifecycle_options(protect_state=config.deletion_protection))

services = PlatformServices(
    "platform",
    PlatformServicesArgs(
        project=config.project,
        region=config.region,
        repository=config.images.repository,
        vertex=config.vertex,
        result_retention_days=config.result_retention_days,
        deletion_protection=config.deletion_protection,
    ),
)
after_apis = pulumi.ResourceOptions(depends_on=services.apis)
queues = config.queue_specs()
pubsub = PubSub("pubsub", PubSubArgs(project=config.project, service_agent=services.pubsub_agent.member,
                                     queues=queues, publishers=config.queue_publishers()), opts=after_apis)
gke = GkeCluster("gke", GkeClusterArgs(config=config, depends_on=services.apis))
# Vertex AI roles are granted only to a stack that sends jobs there (vertex.jobTypes, or vertex.overflow on).
routes_to_vertex = config.vertex.uses_vertex_ai
identities = Identities(
    "iam",
    IdentitiesArgs(
        project=config.project, workload_pool=gke.workload_pool, result_bucket=services.result_bucket.name,
        vertex=routes_to_vertex, queue_subscriptions=tuple(queue.subscription for queue in queues),
        topics=pubsub.topic_names, subscriptions=pubsub.subscription_names,
    ),
    opts=after_apis,
)

in_cluster = pulumi.ResourceOptions(providers=[gke.provider])
worker_image = config.image("gpu-worker", config.images.worker_tag, config.images.worker_digest)
scheduler_image = config.image("gpu-scheduler", config.images.scheduler_tag, config.images.scheduler_digest)
dask = DaskCluster(
    "dask",
    DaskClusterArgs(
        image=worker_image,
        scheduler_image=scheduler_image,  # the Dask scheduler needs no kernels and no GPU
        pools=worker_pools(config.gpu_pools),
        runtime_service_account_email=identities.emails[contract.RUNTIME_SERVICE_ACCOUNT.account_id],
        operator_image_digest=config.images.operator_digest,
    ),
    opts=in_cluster,
)
scheduler = SchedulerWorkload(
    "scheduler",
    SchedulerWorkloadArgs(
        project=config.project,
        image=scheduler_image,
        result_store=services.result_store_url,
        scheduler_service_account_email=identities.emails[contract.SCHEDULER_SERVICE_ACCOUNT.account_id],
        vertex=VertexRouting(
            job_types=config.vertex.job_types,
            service_account=identities.emails[contract.RUNTIME_SERVICE_ACCOUNT.account_id],
            image=worker_image,
            region=config.region,
            machine_type=config.vertex.machine_type,
            accelerator=config.vertex.accelerator_type,
            accelerator_count=config.vertex.accelerator_count,
            spill_after_s=config.vertex.overflow,
        ) if routes_to_vertex else None,
        control_token=control_token,
        replicas=config.scheduler_replicas,
        compute_namespace=dask.namespace,
        queued_pools=config.queued_pools(),
        queues=queues,
    ),
    opts=in_cluster,
)
monitoring = Monitoring("monitoring", MonitoringArgs(), opts=in_cluster)
# What the pull-request preview (the bootstrap's preview account) may dry-run in the cluster; the namespaces
# its Roles live in come from the workloads above.
preview_access = PreviewAccess(
    "preview-access", PreviewAccessArgs(preview_account=account_email(PREVIEW_ACCOUNT_ID, config.project)),
    opts=pulumi.ResourceOptions(providers=[gke.provider], depends_on=[dask, scheduler]),
)

pulumi.export("cluster_name", gke.cluster.name)
pulumi.export("kubeconfig", gke.kubeconfig)
pulumi.export("topics", pubsub.topic_ids)
pulumi.export("subscriptions", pubsub.subscription_ids)
pulumi.export("service_accounts", identities.emails)
pulumi.export("scheduler_url", scheduler.service_url)
pulumi.export("dask_scheduler_address", dask.scheduler_address)
pulumi.export("dask_worker_groups", dask.worker_groups)
pulumi.export("alerts", monitoring.alerts)
pulumi.export("result_bucket", services.result_bucket.name)
pulumi.export("result_store_url", services.result_store_url)
pulumi.export("registry_url", services.registry_url)
pulumi.export("vertex_job_settings", services.vertex_job_settings)
