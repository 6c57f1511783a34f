"""The GPU Runtime Pulumi program: read the stack's config, wire the components, export what operators need.

Order matters only where the cloud needs it: APIs before anything that uses them; the cluster before the
Workload Identity bindings (its identity pool must exist); the Kubernetes side through the cluster's
provider. Everything else is in the components.
"""

import pulumi
import pulumi_gcp as gcp

from components import contract
from components.config import load_control_token, load_stack_config
from components.gke import GkeCluster, GkeClusterArgs
from components.iam import Identities, IdentitiesArgs
from components.platform_services import PlatformServices, PlatformServicesArgs
from components.pubsub import PubSub, PubSubArgs

config = load_stack_config()
control_token = load_control_token()
project_number = gcp.organizations.get_project_output(project_id=config.project).number

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
pubsub = PubSub("pubsub", PubSubArgs(project=config.project, project_number=project_number), opts=after_apis)
gke = GkeCluster("gke", GkeClusterArgs(config=config, depends_on=services.apis))
identities = Identities(
    "iam", IdentitiesArgs(project=config.project, workload_pool=gke.workload_pool), opts=after_apis
)

pulumi.export("cluster_name", gke.cluster.name)
pulumi.export("kubeconfig", gke.kubeconfig)
pulumi.export("topics", pubsub.topic_ids)
pulumi.export("subscriptions", pubsub.subscription_ids)
pulumi.export("service_accounts", identities.emails)
pulumi.export("scheduler_url", contract.SCHEDULER_URL)
pulumi.export("result_bucket", services.result_bucket.name)
pulumi.export("result_store_url", services.result_store_url)
pulumi.export("registry_url", services.registry_url)
pulumi.export("vertex_job_settings", services.vertex_job_settings)
