"""GPU quota needs per region, from the rendered node pools: each quota's GPUs at the pools' maximum."""

from __future__ import annotations

from components.quotas import gpu_quota_needs, quota_metric
from tests.components.infra import stack_config, stack_plan


def test_the_production_plan_names_each_gpu_quota_and_how_many_at_full_scale() -> None:
    config = stack_config("production")
    plan = stack_plan("production")
    expected: dict[str, int] = {}
    for pool in config.gpu_pools:
        zones = 1 if pool.queued_provisioning else len(pool.zones or config.zones)  # queued: total, not per zone
        metric = quota_metric(pool.accelerator_type, pool.spot)
        expected[metric] = expected.get(metric, 0) + pool.max_nodes * zones * pool.accelerator_count
    assert {need.metric: need.gpus for need in plan.quotas} == expected
    assert {need.region for need in plan.quotas} == {config.region}
    assert expected["NVIDIA_A100_GPUS"] == 4 * 4  # four nodes a zone, four zones, one A100 each
    assert "PREEMPTIBLE_NVIDIA_T4_GPUS" in expected  # spot GPUs count against a quota of their own
    assert plan.to_json()["gpu_quotas"][0]["metric"] == sorted(expected)[0]


def test_cpu_pools_need_no_gpu_quota() -> None:
    plan = stack_plan("staging")
    system = [r for r in plan.resources if r.type == "gcp:container/nodePool:NodePool" and r.props["name"] == "system"]
    assert system and gpu_quota_needs(system, "us-central1") == ()
