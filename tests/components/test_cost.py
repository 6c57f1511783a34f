"""The cost estimate: both committed stacks priced by hand from their config and the pricing file, the
spot band, unpriced pools, and what the plan prints and carries in its JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from components.config import GpuPoolConfig, StackConfig, SystemPoolConfig
from components.rendered import NODE_POOL, Resource
from components.review.cost import PRICING_DIR, CostError, Range, estimate, load_price_table, vertex_cost
from components.review.plan import STACKS
from gpurt.cli import plan as plan_commands
from tests.components.infra import stack_config, stack_plan

RAW = yaml.safe_load((PRICING_DIR / "us-central1.yaml").read_text())
HOURS = RAW["hoursPerMonth"]
SPOT_LOW, SPOT_HIGH = 1 - RAW["spotDiscount"]["max"], 1 - RAW["spotDiscount"]["min"]  # share of on-demand paid


def _node_month(pool: GpuPoolConfig | SystemPoolConfig) -> tuple[float, float]:
    """(machine and GPUs, boot disk) per node per month, by hand from the published list prices."""
    machine = RAW["machines"][pool.machine_type]
    hourly = machine["hourly"]
    if isinstance(pool, GpuPoolConfig) and not machine.get("includesGpus"):
        hourly += RAW["gpus"][pool.accelerator_type] * pool.accelerator_count
    return hourly * HOURS, RAW["diskPerGbMonth"]["pd-balanced"] * pool.disk_size_gb


def _expected(config: StackConfig) -> dict[str, dict[str, float]]:
    expected = {}
    pools: list[tuple[str, GpuPoolConfig | SystemPoolConfig]] = [("system", config.system_pool)]
    pools += [(f"gpu-{pool.name}", pool) for pool in config.gpu_pools]
    for name, pool in pools:
        compute, disk = _node_month(pool)
        zones = len(config.pool_zones(pool))
        low, high = pool.min_nodes * zones, pool.max_nodes * zones
        expected[name] = {
            "on_demand_low": low * (compute + disk), "on_demand_high": high * (compute + disk),
            # Spot: the table's discount band off machines and GPUs, never off the disk.
            "spot_low": low * (compute * SPOT_LOW + disk), "spot_high": high * (compute * SPOT_HIGH + disk),
        }
    return expected


@pytest.mark.parametrize("stack", STACKS)
def test_cost_of_each_stack_matches_a_hand_computation(stack: str) -> None:
    config, cost = stack_config(stack), stack_plan(stack).cost
    assert cost is not None and cost.incomplete == ()
    expected = _expected(config)
    assert {p.pool for p in cost.pools} == set(expected)
    fee = RAW["clusterFeePerHour"] * HOURS  # one regional cluster
    assert cost.cluster_fee == pytest.approx(fee)
    billed_low = billed_high = fee
    for pool in cost.pools:
        want = expected[pool.pool]
        assert pool.on_demand.low == pytest.approx(want["on_demand_low"])
        assert pool.on_demand.high == pytest.approx(want["on_demand_high"])
        assert pool.spot_range.low == pytest.approx(want["spot_low"])
        assert pool.spot_range.high == pytest.approx(want["spot_high"])
        spot = pool.pool != "system" and next(p for p in config.gpu_pools if f"gpu-{p.name}" == pool.pool).spot
        assert pool.spot is spot
        billed_low += want["spot_low"] if spot else want["on_demand_low"]
        billed_high += want["spot_high"] if spot else want["on_demand_high"]
    assert (cost.total.low, cost.total.high) == (pytest.approx(billed_low), pytest.approx(billed_high))


def test_production_a100_pool_at_its_maximum() -> None:
    cost = stack_plan("production").cost
    assert cost is not None
    [a100] = [p for p in cost.pools if p.pool == "gpu-a100"]
    # 4 nodes per zone x 4 zones of a2-highgpu-1g (A100 included) with a 200 GB balanced boot disk.
    assert a100.nodes == (0, 16)
    a2_month = RAW["machines"]["a2-highgpu-1g"]["hourly"] * HOURS + 200 * RAW["diskPerGbMonth"]["pd-balanced"]
    assert a100.on_demand.high == pytest.approx(16 * a2_month)
    assert a100.gpus == "1x nvidia-tesla-a100" and not a100.spot


def test_the_plan_json_carries_the_cost() -> None:
    document = stack_plan("staging").to_json()["cost"]
    assert document["currency"] == "USD" and document["recorded"] == RAW["recorded"]
    assert document["sources"] == RAW["sources"]
    assert document["spot_model"] == {"discount_min": RAW["spotDiscount"]["min"],
                                      "discount_max": RAW["spotDiscount"]["max"]}
    [t4] = [p for p in document["pools"] if p["pool"] == "gpu-t4-spot"]
    assert t4["spot"] is True and t4["billed"] == t4["spot_range"]
    assert document["total"]["low"] <= document["total"]["high"] <= document["total_on_demand"]["high"]


def test_the_plan_prints_the_cost_table_with_its_date_and_model() -> None:
    console = Console(record=True, width=200)
    plan_commands._print_cost(console, stack_plan("production"))
    text = console.export_text()
    assert "estimated monthly cost" in text and "gpu-a100" in text and "cluster fee" in text
    assert f"recorded {RAW['recorded']}" in text and f"{1 - SPOT_HIGH:.0%}-{1 - SPOT_LOW:.0%} discount" in text
    [a100] = [p for p in stack_plan("production").cost.pools if p.pool == "gpu-a100"]
    assert f"${a100.on_demand.high:,.0f}" in text  # the A100 pool at its maximum


def _pool(**node: Any) -> Resource:
    return Resource(NODE_POOL, "p", {
        "name": "p", "nodeLocations": ["z1", "z2"], "autoscaling": {"minNodeCount": 1, "maxNodeCount": 2},
        "nodeConfig": {"machineType": "n1-standard-8", "diskSizeGb": 100, **node},
    })


def test_unpriced_pools_are_named_and_left_out_of_the_totals() -> None:
    table = load_price_table("us-central1")
    cost = estimate([_pool(machineType="z9-mystery-8"), _pool(guestAccelerators=[{"type": "nvidia-b999", "count": 1}]),
                     _pool()], table)
    assert cost.incomplete == ("p: no price for machine type 'z9-mystery-8'", "p: no price for GPU 'nvidia-b999'")
    only = cost.pools[2]
    n1_month = RAW["machines"]["n1-standard-8"]["hourly"] * HOURS + 100 * RAW["diskPerGbMonth"]["pd-balanced"]
    assert cost.total.low == pytest.approx(only.on_demand.low) == pytest.approx(2 * n1_month)
    assert cost.cluster_fee == 0


def test_pricing_table_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(CostError, match="no pricing table for region europe-west4 \\(have: us-central1\\)"):
        load_price_table("europe-west4")
    (tmp_path / "us-east1.yaml").write_text(yaml.safe_dump({**RAW, "region": "us-east1", "hoursPerMonth": -1}))
    with pytest.raises(CostError, match="not a valid pricing table"):
        load_price_table("us-east1", tmp_path)
    (tmp_path / "us-west1.yaml").write_text(yaml.safe_dump(RAW))
    with pytest.raises(CostError, match="says region us-central1"):
        load_price_table("us-west1", tmp_path)


VERTEX = RAW["vertexTraining"]


@pytest.mark.parametrize("stack", STACKS)
def test_each_stacks_vertex_overflow_is_priced_per_job_hour_by_hand(stack: str) -> None:
    vertex_config, cost = stack_config(stack).vertex, stack_plan(stack).cost
    assert cost is not None and cost.vertex is not None and cost.vertex.missing == ""
    machine = RAW["machines"][vertex_config.machine_type]
    if vertex_config.machine_type in VERTEX["machines"]:
        hourly = VERTEX["machines"][vertex_config.machine_type]
    else:
        hourly = machine["hourly"] * VERTEX["markup"]
    if not machine.get("includesGpus"):
        compute_gpu = vertex_config.accelerator_type.lower().replace("_", "-")
        hourly += RAW["gpus"][compute_gpu] * VERTEX["markup"] * vertex_config.accelerator_count
    assert cost.vertex.hourly == pytest.approx(hourly)
    assert (cost.vertex.machine_type, cost.vertex.accelerator_count) == (
        vertex_config.machine_type, vertex_config.accelerator_count)
    # Per job-hour, apart: the monthly totals are the pools' and the fee's alone.
    assert cost.total == sum((p.billed for p in cost.pools), Range(cost.cluster_fee, cost.cluster_fee))


def test_a_listed_vertex_price_wins_over_the_estimate() -> None:
    table = load_price_table("us-central1")
    listed = vertex_cost("n1-standard-4", "NVIDIA_TESLA_T4", 2, table)
    assert listed.hourly == pytest.approx(VERTEX["machines"]["n1-standard-4"] + 2 * 0.35 * VERTEX["markup"])
    assert listed.estimated == ("NVIDIA_TESLA_T4",)
    # An accelerator-optimized machine priced from Compute Engine carries its GPUs; none is added.
    a2 = vertex_cost("a2-highgpu-2g", "NVIDIA_TESLA_A100", 2, table)
    assert a2.hourly == pytest.approx(RAW["machines"]["a2-highgpu-2g"]["hourly"] * VERTEX["markup"])
    assert vertex_cost("z9-mystery", "NVIDIA_TESLA_T4", 1, table).missing == "no price for machine type 'z9-mystery'"
    assert vertex_cost("n1-standard-8", "NVIDIA_B999", 1, table).missing == "no price for GPU 'NVIDIA_B999'"


def test_a_stack_without_vertex_ai_has_no_overflow_price() -> None:
    # No gpu-scheduler settings naming a custom-job machine: nothing is priced, and the plan says overflow is off.
    cost = estimate([_pool()], load_price_table("us-central1"))
    assert cost.vertex is None and cost.to_json()["vertex_overflow"] is None


def test_the_plan_prints_and_carries_the_vertex_price() -> None:
    plan = stack_plan("production")
    console = Console(record=True, width=300)
    plan_commands._print_cost(console, plan)
    text = console.export_text()
    assert plan.cost is not None and plan.cost.vertex is not None
    assert f"Vertex AI overflow: ${plan.cost.vertex.hourly:,.2f} per job-hour on a2-highgpu-1g" in text
    assert "estimate: a2-highgpu-1g" in text
    assert plan.to_json()["cost"]["vertex_overflow"]["per_hour"] == round(plan.cost.vertex.hourly, 4)
