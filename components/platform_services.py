"""Project services and storage: enabled APIs, the image registry (read), the result bucket.

Also carries the Vertex AI custom-job settings of the stack (display-name prefix, machine, accelerator) as
outputs: Vertex custom jobs are created per job by the scheduler, not declared here, so what the program owns is
their defaults. No Vertex AI staging bucket: the scheduler submits container custom jobs, which stage nothing
(a staging bucket serves Python-package jobs and the SDK's uploads), and their output goes to the result bucket.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from components.config import VertexConfig
from runtime.protocol import contract

REQUIRED_APIS = (
    "compute.googleapis.com",
    "container.googleapis.com",
    "pubsub.googleapis.com",
    "aiplatform.googleapis.com",
    "artifactregistry.googleapis.com",
    "storage.googleapis.com",
    "monitoring.googleapis.com",
    "logging.googleapis.com",
    "iam.googleapis.com",
    # Image streaming (the GPU pools' gcfs_config) reads images through the Container File System API
    # (https://cloud.google.com/kubernetes-engine/docs/how-to/image-streaming, "Requirements").
    "containerfilesystem.googleapis.com",
    # `gpurt validate` reads the overflow machine's Vertex AI training quota through the Cloud Quotas API.
    "cloudquotas.googleapis.com",
)
# Old versions of overwritten results are kept this long (days) so a bad write can be undone.
NONCURRENT_VERSION_DAYS = 14


@dataclass
class PlatformServicesArgs:
    """Inputs of the project-services component."""

    project: pulumi.Input[str]
    """GCP project id."""

    region: str
    """Region of the registry, the buckets and Vertex AI jobs."""

    repository: str
    """Artifact Registry repository id for the scheduler and worker images."""

    vertex: VertexConfig
    """Vertex AI custom-job defaults of this stack."""

    result_retention_days: int
    """Result objects older than this many days are deleted."""

    deletion_protection: bool
    """When set, buckets refuse deletion while they hold objects."""

    labels: dict[str, str] = field(default_factory=lambda: dict(contract.GCP_LABELS))
    """Labels on every labelled resource."""


class PlatformServices(pulumi.ComponentResource):
    """APIs, the bootstrap's registry (read), the result bucket and the Vertex AI custom-job settings."""

    apis: list[gcp.projects.Service]

    def __init__(
        self, name: str, args: PlatformServicesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-runtime:platform_services:PlatformServices", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.apis = [
            # Leaving an API enabled on destroy is deliberate: other workloads in the project may rely on it.
            gcp.projects.Service(
                f"{name}-{api.split('.')[0]}",
                project=args.project,
                service=api,
                disable_on_destroy=False,
                opts=child,
            )
            for api in REQUIRED_APIS
        ]
        after_apis = pulumi.ResourceOptions(parent=self, depends_on=self.apis)
        # Pub/Sub's service agent forwards dead letters; Google creates it lazily, so right after the API is
        # enabled it may not exist yet and a grant to it fails. Asking for its identity creates it.
        self.pubsub_agent = gcp.projects.ServiceIdentity(
            f"{name}-pubsub-agent", project=args.project, service="pubsub.googleapis.com", opts=after_apis
        )

        # The bootstrap creates the repository (the deploy pushes images before `pulumi up`); this program only
        # reads it, so a missing bootstrap fails here with the repository's name, and nothing is created twice.
        self.registry = gcp.artifactregistry.get_repository_output(
            project=args.project, location=args.region, repository_id=args.repository,
            opts=pulumi.InvokeOutputOptions(parent=self, depends_on=self.apis),
        )
        self.registry_url = pulumi.Output.concat(
            args.region, "-docker.pkg.dev/", self.registry.project, "/", self.registry.repository_id
        )

        self.result_bucket = self._bucket(
            f"{name}-results",
            pulumi.Output.from_input(args.project).apply(contract.result_bucket),
            args,
            lifecycle=[
                _delete_after(age_days=args.result_retention_days),
                _delete_after(noncurrent_days=NONCURRENT_VERSION_DAYS),
            ],
            versioning=True,
            opts=after_apis,
        )
        self.result_store_url = self.result_bucket.url.apply(lambda url: f"{url}/results")
        self.vertex_job_settings = {
            "display_name_prefix": contract.VERTEX_JOB_PREFIX,
            "region": args.region,
            "machine_type": args.vertex.machine_type,
            "accelerator_type": args.vertex.accelerator_type,
            "accelerator_count": args.vertex.accelerator_count,
        }
        self.register_outputs({
            "registry_url": self.registry_url,
            "result_bucket": self.result_bucket.name,
            "result_store_url": self.result_store_url,
            "vertex_job_settings": self.vertex_job_settings,
        })

    @staticmethod
    def _bucket(
        resource_name: str,
        bucket_name: pulumi.Input[str],
        args: PlatformServicesArgs,
        lifecycle: list[gcp.storage.BucketLifecycleRuleArgs],
        versioning: bool,
        opts: pulumi.ResourceOptions,
    ) -> gcp.storage.Bucket:
        return gcp.storage.Bucket(
            resource_name,
            name=bucket_name,
            project=args.project,
            location=args.region,
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            versioning=gcp.storage.BucketVersioningArgs(enabled=versioning),
            lifecycle_rules=lifecycle,
            force_destroy=not args.deletion_protection,
            labels=args.labels,
            opts=opts,
        )


def _delete_after(
    age_days: int | None = None, noncurrent_days: int | None = None
) -> gcp.storage.BucketLifecycleRuleArgs:
    """A lifecycle rule deleting objects by age, or non-current versions by time since they were replaced."""
    return gcp.storage.BucketLifecycleRuleArgs(
        action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
        condition=gcp.storage.BucketLifecycleRuleConditionArgs(
            age=age_days, days_since_noncurrent_time=noncurrent_days
        ),
    )
