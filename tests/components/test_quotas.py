"""Every quota a stack reaches, from the rendered node pools and the Vertex AI overflow."""

from __future__ import annotations

import pytest

from components.review.quotas import (
    GLOBAL,
    QuotaNeed,
    cpu_quota_metric,
    disk_quota_metric,
    machine_vcpus,
    quota_metric,
    quota_needs,
)
from tests.components.infra import stack_config, stack_plan


def test_the_production_plan_names_each_gpu_quota_and_how_many_at_full_scale() -> None:
    config = stack_config("production")
    plan = stack_plan("production")
    expected: dict[str, int] = {}
    for pool in config.gpu_pools:
        zones = 1 if pool.queued_provisioning else len(pool.zones or config.zones)  # queued: total, not per zone
        metric = quota_metric(pool.accelerator_type, pool.spot)
        expected[metric] = expected.get(metric, 0) + pool.max_nodes * zones * pool.accelerator_count
    gpus = {n.metric: n.amount for n in plan.quotas if n.unit == "GPUs" and n.scope == config.region
            and n.service == "compute.googleapis.com"}
    assert gpus == expected
    assert expected["NVIDIA_A100_GPUS"] == 4 * 4  # four nodes a zone, four zones, one A100 each
    assert "PREEMPTIBLE_NVIDIA_T4_GPUS" in expected  # spot GPUs count against a quota of their own


def test_the_production_plan_names_every_quota_the_pools_reach() -> None:
    """issue #42: at production maxima the pools need 392 CPUS, 192 A2_CPUS, 8.9 TB of SSD_TOTAL_GB, and a
    global GPUS_ALL_REGIONS (often 0 in a new project); the overflow needs Vertex AI's own A100 quota."""
    plan = stack_plan("production")
    needs = {(n.service, n.scope, n.metric): n for n in plan.quotas}

    compute = "compute.googleapis.com"
    assert needs[(compute, "us-central1", "CPUS")].amount == 3 * 3 * 8 + 2 * 4 * 8 + 8 * 4 * 8  # system, v100, t4
    assert needs[(compute, "us-central1", "CPUS")].minimum == 3 * 8  # the system pool's one node a zone
    assert needs[(compute, "us-central1", "A2_CPUS")].amount == 16 * 12  # a2-highgpu-1g: 12 vCPUs
    assert needs[(compute, "us-central1", "SSD_TOTAL_GB")].amount == 8900  # pd-balanced boot disks
    assert needs[(compute, GLOBAL, "GPUS_ALL_REGIONS")].amount == 16 + 8 + 32
    assert needs[(compute, GLOBAL, "CPUS_ALL_REGIONS")].amount == 392 + 192
    vertex = needs[("aiplatform.googleapis.com", "us-central1",
                    "aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus")]
    assert vertex.amount == 1 and vertex.quota_id == "CustomModelTrainingNvidiaA100GPUsPerProjectPerRegion"
    assert plan.to_json()["quotas"][0] == vertex.to_json()


def test_a_stack_routing_nothing_to_vertex_needs_no_vertex_quota() -> None:
    plan = stack_plan("staging")
    system = [r for r in plan.resources if r.type == "gcp:container/nodePool:NodePool" and r.props["name"] == "system"]
    needs = quota_needs(system, "us-central1")
    assert system and {n.unit for n in needs} == {"vCPUs", "GB"}  # a CPU pool needs no GPU quota


@pytest.mark.parametrize(("machine_type", "vcpus", "metric"), [
    ("e2-standard-8", 8, "CPUS"), ("n1-standard-8", 8, "CPUS"), ("n1-custom-8-30720", 8, "CPUS"),
    ("n2-highmem-16", 16, "N2_CPUS"), ("g2-standard-24", 24, "G2_CPUS"), ("a2-highgpu-2g", 24, "A2_CPUS"),
    ("a2-megagpu-16g", 96, "A2_CPUS"), ("a3-highgpu-8g", 208, "A3_CPUS"),
])
def test_machine_types_count_their_vcpus_against_their_series_quota(machine_type: str, vcpus: int,
                                                                   metric: str) -> None:
    assert machine_vcpus(machine_type) == vcpus
    assert cpu_quota_metric(machine_type) == metric


def test_a_machine_type_of_unknown_vcpus_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="cannot tell the vCPUs of machine type 'x9-ultragpu-8g'"):
        machine_vcpus("x9-ultragpu-8g")


def test_balanced_and_ssd_disks_share_a_quota_standard_disks_have_their_own() -> None:
    assert disk_quota_metric("pd-balanced") == disk_quota_metric("pd-ssd") == "SSD_TOTAL_GB"
    assert disk_quota_metric("pd-standard") == "DISKS_TOTAL_GB"


def test_the_request_command_names_the_quota_its_dimension_and_the_need() -> None:
    regional = QuotaNeed("PREEMPTIBLE_NVIDIA_T4_GPUS", "us-central1", 32, 0, "GPUs", ("gpu-t4-spot",))
    assert regional.request_command("p") == (
        "gcloud quotas preferences create --project=p --service=compute.googleapis.com "
        "--quota-id=PREEMPTIBLE-NVIDIA-T4-GPUS-per-project-region --preferred-value=32 --dimensions=region=us-central1")
    assert QuotaNeed("GPUS_ALL_REGIONS", GLOBAL, 4, 0, "GPUs", ()).quota_id == "GPUS-ALL-REGIONS-per-project"
