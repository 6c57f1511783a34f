"""Project services and storage: APIs, registry, hardened buckets, Vertex AI custom-job settings."""

from __future__ import annotations

import pulumi
import pytest

from components.config import VertexConfig
from components.platform_services import PlatformServices, PlatformServicesArgs
from components.review.plan import Recording
from tests.components.infra import PROJECT, REGION, children_of, named, of_type, run

BUCKET = "gcp:storage/bucket:Bucket"


@pytest.fixture(scope="module")
def recording() -> Recording:
    def build() -> None:
        services = PlatformServices("platform", PlatformServicesArgs(
            project=PROJECT, region=REGION, repository="gpu-runtime",
            vertex=VertexConfig(machine_type="a2-highgpu-1g", accelerator_type="NVIDIA_TESLA_A100"),
            result_retention_days=90, deletion_protection=True,
        ))
        pulumi.export("vertex", services.vertex_job_settings)
        pulumi.export("registry_url", services.registry_url)
        pulumi.export("result_store_url", services.result_store_url)

    return run(build)


def test_required_apis_enabled(recording: Recording) -> None:
    apis = {s.props["service"] for s in of_type(recording, "gcp:projects/service:Service")}
    assert apis >= {
        f"{api}.googleapis.com" for api in (
            "container", "pubsub", "aiplatform", "artifactregistry", "storage", "monitoring", "logging", "iam",
            "compute", "containerfilesystem",
        )
    }


def test_buckets_are_private_uniform_and_expire(recording: Recording) -> None:
    for bucket in of_type(recording, BUCKET):
        assert bucket.props["uniformBucketLevelAccess"] is True
        assert bucket.props["publicAccessPrevention"] == "enforced"
        assert bucket.props["forceDestroy"] is False  # deletion protection on
        assert bucket.props["lifecycleRules"]
    results = named(recording, BUCKET, "platform-results").props
    assert results["name"] == f"{PROJECT}-gpu-runtime-results"
    assert results["versioning"] == {"enabled": True}
    conditions = [rule["condition"] for rule in results["lifecycleRules"]]
    assert {"age": 90} in conditions


def test_the_registry_is_read_never_created_and_vertex_settings(recording: Recording) -> None:
    # The bootstrap owns the repository (the deploy pushes before `pulumi up`): a second create would be a 409.
    assert of_type(recording, "gcp:artifactregistry/repository:Repository") == []
    assert recording.outputs["registry_url"] == f"{REGION}-docker.pkg.dev/{PROJECT}/gpu-runtime"
    assert recording.outputs["result_store_url"] == f"gs://{PROJECT}-gpu-runtime-results/results"
    assert recording.outputs["vertex"] == {
        "display_name_prefix": "gpu-runtime-",
        "region": REGION,
        "machine_type": "a2-highgpu-1g",
        "accelerator_type": "NVIDIA_TESLA_A100",
        "accelerator_count": 1,
    }
    # issue #42: a Vertex AI staging bucket was created and used by nothing (container custom jobs stage nothing)
    assert [b.props["name"] for b in of_type(recording, BUCKET)] == [f"{PROJECT}-gpu-runtime-results"]


def test_everything_is_parented(recording: Recording) -> None:
    assert len(children_of(recording, "platform")) == len([r for r in recording.resources if r.custom])


def test_the_pubsub_service_agent_is_made_once_its_api_is_on(recording: Recording) -> None:
    [agent] = of_type(recording, "gcp:projects/serviceIdentity:ServiceIdentity")
    assert agent.props["service"] == "pubsub.googleapis.com"
    [pubsub_api] = [s for s in of_type(recording, "gcp:projects/service:Service")
                    if s.props["service"] == "pubsub.googleapis.com"]
    assert pubsub_api.urn in agent.dependencies
