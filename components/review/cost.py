"""Estimated monthly cost of a plan's node pools and clusters, from a pricing table shipped in the project.

Pure: rendered resources in (``components.rendered``, as the offline plan records them or as a plan's JSON
carries them), figures out. A pool costs nodes x (machine + GPUs + boot disk) x hours per month, from its minimum
nodes always on to every node at its maximum; node counts are per zone, so each is multiplied by the
pool's zones. Spot is a range: the documented discount band on machine and GPU prices (disks are not
discounted). The tables are ``components/review/pricing/<region>.yaml``, each with the date it was recorded and
its sources. Vertex AI overflow is paid per job-hour, not per month: the estimate carries the hourly price of
the stack's custom-job machine beside the pools (from the gpu-scheduler's rendered settings), outside the
totals. Not counted: network egress, Pub/Sub, storage, logging, Vertex AI job-hours and any discount beyond
spot (sustained or committed use).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from components.rendered import CLUSTER, NODE_POOL, Resource, lookup
from components.review.iam_proof import scheduler_settings
from runtime.protocol.contract import SchedulerEnv

PRICING_DIR: Final = Path(__file__).resolve().parent / "pricing"
# GKE's default boot disk when a pool names none.
DEFAULT_DISK_TYPE: Final = "pd-balanced"
DEFAULT_DISK_GB: Final = 100
EXCLUDED: Final = ("network egress, Pub/Sub, storage, logging, Vertex AI job-hours (priced per hour, apart), "
                   "sustained/committed-use discounts")


class CostError(ValueError):
    """No pricing table for the region, or the table itself is malformed."""


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class MachinePrice(_Model):
    """A machine type's hourly list price."""

    hourly: float = Field(gt=0)
    includes_gpus: bool = Field(False, description="Accelerator-optimized types price their GPUs in.")


class DiscountBand(_Model):
    """Spot's documented discount off on-demand, as fractions."""

    min: float = Field(ge=0, lt=1)
    max: float = Field(ge=0, lt=1)


class VertexTrainingPrices(_Model):
    """Vertex AI custom training's hourly list prices, and how an unlisted machine or GPU is estimated."""

    sources: tuple[str, ...] = Field(min_length=1)
    machines: dict[str, float] = Field(default_factory=dict, description="Listed machine prices per hour.")
    markup: float = Field(gt=1, description="Vertex AI's price over the same Compute Engine resource, for "
                          "machines and GPUs the table does not list.")


class PriceTable(_Model):
    """One region's list prices, with where and when they were read."""

    region: str
    recorded: str = Field(description="Date the figures were recorded (YYYY-MM-DD).")
    sources: tuple[str, ...] = Field(min_length=1)
    hours_per_month: float = Field(gt=0)
    cluster_fee_per_hour: float = Field(ge=0)
    spot_discount: DiscountBand
    disk_per_gb_month: dict[str, float]
    machines: dict[str, MachinePrice]
    gpus: dict[str, float]
    vertex_training: VertexTrainingPrices | None = None


def load_price_table(region: str, directory: Path = PRICING_DIR) -> PriceTable:
    """The pricing table of ``region``; raises CostError when there is none or it is malformed."""
    path = directory / f"{region}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in directory.glob("*.yaml"))
        raise CostError(f"no pricing table for region {region} (have: {', '.join(known) or 'none'})")
    try:
        table = PriceTable.model_validate(yaml.safe_load(path.read_text()))
    except (yaml.YAMLError, ValidationError) as exc:
        raise CostError(f"{path.name} is not a valid pricing table: {exc}") from None
    if table.region != region:
        raise CostError(f"{path.name} says region {table.region}, not {region}")
    return table


@dataclass(frozen=True)
class Range:
    """A monthly amount in USD from its lowest to its highest."""

    low: float
    high: float

    def __add__(self, other: Range) -> Range:
        return Range(self.low + other.low, self.high + other.high)


ZERO: Final = Range(0.0, 0.0)


@dataclass(frozen=True)
class PoolCost:
    """One node pool's monthly cost: nodes from minimum to maximum, on-demand and on spot."""

    pool: str
    machine_type: str
    gpus: str
    """``2x nvidia-tesla-t4``, or empty for a CPU pool."""
    spot: bool
    nodes: tuple[int, int]
    """(minimum, maximum) nodes over all the pool's zones."""
    on_demand: Range
    spot_range: Range
    """Minimum nodes at the deepest discount to maximum nodes at the shallowest."""
    missing: str = ""
    """Why the pool could not be priced (then every amount is zero)."""

    @property
    def billed(self) -> Range:
        """What the pool is billed as configured: spot pools at spot, the rest on-demand."""
        return self.spot_range if self.spot else self.on_demand


@dataclass(frozen=True)
class VertexCost:
    """What one Vertex AI overflow job costs per hour on the stack's custom-job machine."""

    machine_type: str
    accelerator: str
    accelerator_count: int
    hourly: float
    """Machine plus GPUs, USD per job-hour (zero when ``missing``)."""
    estimated: tuple[str, ...] = ()
    """Parts priced as Compute Engine's list price times Vertex AI's markup, not from Vertex AI's own list."""
    missing: str = ""
    """Why the machine could not be priced."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready view, USD per job-hour."""
        return {"machine_type": self.machine_type, "accelerator": self.accelerator,
                "accelerator_count": self.accelerator_count, "per_hour": round(self.hourly, 4),
                "estimated": list(self.estimated), "missing": self.missing}


@dataclass(frozen=True)
class CostEstimate:
    """The plan's estimated monthly cost: per pool, the cluster fee, and the total as configured."""

    region: str
    recorded: str
    sources: tuple[str, ...]
    spot_discount: tuple[float, float]
    pools: tuple[PoolCost, ...]
    cluster_fee: float
    """Monthly management fee of every cluster."""
    vertex: VertexCost | None = None
    """Vertex AI overflow's price per job-hour; None when the stack submits no custom jobs."""

    @property
    def total(self) -> Range:
        """Cluster fees plus every pool as billed (spot pools at spot)."""
        return sum((p.billed for p in self.pools), Range(self.cluster_fee, self.cluster_fee))

    @property
    def total_on_demand(self) -> Range:
        """Cluster fees plus every pool on-demand (what spot saves is the difference)."""
        return sum((p.on_demand for p in self.pools), Range(self.cluster_fee, self.cluster_fee))

    @property
    def incomplete(self) -> tuple[str, ...]:
        """Why some pools have no price (the totals leave them out)."""
        return tuple(f"{p.pool}: {p.missing}" for p in self.pools if p.missing)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready view, amounts in USD per month rounded to cents."""
        def money(r: Range) -> dict[str, float]:
            return {"low": round(r.low, 2), "high": round(r.high, 2)}

        return {
            "currency": "USD", "period": "month", "region": self.region, "recorded": self.recorded,
            "sources": list(self.sources),
            "spot_model": {"discount_min": self.spot_discount[0], "discount_max": self.spot_discount[1]},
            "excluded": EXCLUDED,
            "cluster_fee": round(self.cluster_fee, 2),
            "pools": [
                {"pool": p.pool, "machine_type": p.machine_type, "gpus": p.gpus, "spot": p.spot,
                 "nodes": {"min": p.nodes[0], "max": p.nodes[1]}, "on_demand": money(p.on_demand),
                 "spot_range": money(p.spot_range), "billed": money(p.billed), "missing": p.missing}
                for p in self.pools
            ],
            "total": money(self.total),
            "total_on_demand": money(self.total_on_demand),
            "incomplete": list(self.incomplete),
            "vertex_overflow": self.vertex.to_json() if self.vertex else None,
        }


def node_counts(props: Mapping[str, Any]) -> tuple[int, int]:
    """(minimum, maximum) nodes of a pool over all its zones; counts other than totals are per zone."""
    zones = len(lookup(props, "nodeLocations") or []) or 1
    autoscaling = lookup(props, "autoscaling")
    if autoscaling:
        if lookup(autoscaling, "totalMaxNodeCount") is not None:
            return int(lookup(autoscaling, "totalMinNodeCount") or 0), int(lookup(autoscaling, "totalMaxNodeCount"))
        per_zone = int(lookup(autoscaling, "minNodeCount") or 0), int(lookup(autoscaling, "maxNodeCount") or 0)
        return per_zone[0] * zones, per_zone[1] * zones
    fixed = int(lookup(props, "nodeCount") or lookup(props, "initialNodeCount") or 0) * zones
    return fixed, fixed


def pool_cost(props: Mapping[str, Any], table: PriceTable) -> PoolCost:
    """The monthly cost of one node pool, from its engine inputs."""
    node = lookup(props, "nodeConfig") or {}
    machine_type = str(lookup(node, "machineType") or "")
    accelerators = [a for a in lookup(node, "guestAccelerators") or [] if isinstance(a, Mapping)]
    gpus = ", ".join(f"{int(a.get('count') or 0)}x {a.get('type')}" for a in accelerators)
    spot = bool(lookup(node, "spot") or lookup(node, "preemptible"))
    nodes = node_counts(props)
    name = str(lookup(props, "name") or "?")

    def unpriced(why: str) -> PoolCost:
        return PoolCost(name, machine_type, gpus, spot, nodes, ZERO, ZERO, why)

    machine = table.machines.get(machine_type)
    if machine is None:
        return unpriced(f"no price for machine type {machine_type!r}")
    compute_hourly = machine.hourly
    if not machine.includes_gpus:
        for accelerator in accelerators:
            gpu_price = table.gpus.get(str(accelerator.get("type")))
            if gpu_price is None:
                return unpriced(f"no price for GPU {accelerator.get('type')!r}")
            compute_hourly += gpu_price * int(accelerator.get("count") or 0)
    disk_type = str(lookup(node, "diskType") or DEFAULT_DISK_TYPE)
    disk_rate = table.disk_per_gb_month.get(disk_type)
    if disk_rate is None:
        return unpriced(f"no price for disk type {disk_type!r}")
    disk_month = disk_rate * float(lookup(node, "diskSizeGb") or DEFAULT_DISK_GB)
    compute_month = compute_hourly * table.hours_per_month
    low_nodes, high_nodes = nodes
    on_demand = Range(low_nodes * (compute_month + disk_month), high_nodes * (compute_month + disk_month))
    deepest, shallowest = table.spot_discount.max, table.spot_discount.min
    spot_range = Range(low_nodes * (compute_month * (1 - deepest) + disk_month),
                       high_nodes * (compute_month * (1 - shallowest) + disk_month))
    return PoolCost(name, machine_type, gpus, spot, nodes, on_demand, spot_range)


def vertex_cost(machine_type: str, accelerator: str, count: int, table: PriceTable) -> VertexCost:
    """The hourly price of one custom job on ``machine_type`` with ``count`` ``accelerator`` GPUs.

    A machine price Vertex AI lists is taken as is; otherwise, and for every GPU, the Compute Engine list
    price of the same machine or GPU times the table's markup, and the part is named in ``estimated``. An
    accelerator-optimized machine (A2, A3, G2) priced from Compute Engine already includes its GPUs.
    """
    def unpriced(why: str) -> VertexCost:
        return VertexCost(machine_type, accelerator, count, 0.0, missing=why)

    prices = table.vertex_training
    if prices is None:
        return unpriced(f"no Vertex AI prices for region {table.region}")
    estimated: list[str] = []
    gpus_included = False
    if machine_type in prices.machines:
        hourly = prices.machines[machine_type]
    elif machine_type in table.machines:
        compute = table.machines[machine_type]
        hourly, gpus_included = compute.hourly * prices.markup, compute.includes_gpus
        estimated.append(machine_type)
    else:
        return unpriced(f"no price for machine type {machine_type!r}")
    if not gpus_included:
        compute_gpu = accelerator.lower().replace("_", "-")  # NVIDIA_TESLA_T4 is Compute Engine's nvidia-tesla-t4
        if compute_gpu in table.gpus:
            hourly += table.gpus[compute_gpu] * prices.markup * count
            estimated.append(accelerator)
        else:
            return unpriced(f"no price for GPU {accelerator!r}")
    return VertexCost(machine_type, accelerator, count, hourly, tuple(estimated))


def stack_vertex_cost(resources: Iterable[Resource], table: PriceTable) -> VertexCost | None:
    """The price per job-hour of the stack's Vertex AI custom jobs, read from the gpu-scheduler's rendered
    settings (what it will ask Vertex AI for); None when the scheduler submits none."""
    settings = scheduler_settings(list(resources))
    machine_type = settings.get(SchedulerEnv.VERTEX_MACHINE_TYPE)
    if not machine_type:
        return None
    count = int(settings.get(SchedulerEnv.VERTEX_ACCELERATOR_COUNT) or 1)
    return vertex_cost(machine_type, settings.get(SchedulerEnv.VERTEX_ACCELERATOR, ""), count, table)


def estimate(resources: Iterable[Resource], table: PriceTable) -> CostEstimate:
    """The monthly cost of the node pools and clusters among ``resources`` (components are not billed), and
    the hourly price of its Vertex AI overflow jobs."""
    resources = list(resources)
    billed = [r for r in resources if r.custom]
    pools = tuple(pool_cost(r.props, table) for r in billed if r.type == NODE_POOL)
    clusters = sum(1 for r in billed if r.type == CLUSTER)
    return CostEstimate(
        region=table.region, recorded=table.recorded, sources=table.sources,
        spot_discount=(table.spot_discount.min, table.spot_discount.max), pools=pools,
        cluster_fee=clusters * table.cluster_fee_per_hour * table.hours_per_month,
        vertex=stack_vertex_cost(resources, table),
    )
