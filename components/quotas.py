"""The GPU quota a stack needs per region, from its rendered node pools: what a fresh project must request.

A new project's GPU quotas start at 0, and a GKE pool cannot scale past its region's quota. Compute Engine
counts GPUs per region and model, spot (preemptible) GPUs under a quota of their own
(https://cloud.google.com/compute/resource-usage#gpu_quota). A stack's need is each pool's GPUs per node
times its most nodes over all its zones, added up per quota.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from components.cost import node_counts
from components.rendered import NODE_POOL, Resource, lookup


def quota_metric(accelerator: str, spot: bool = False) -> str:
    """The Compute Engine quota metric of a GKE accelerator type: ``nvidia-tesla-t4`` -> ``NVIDIA_T4_GPUS``."""
    model = accelerator.lower().removeprefix("nvidia-").removeprefix("tesla-").replace("-", "_").upper()
    return f"{'PREEMPTIBLE_' if spot else ''}NVIDIA_{model}_GPUS"


@dataclass(frozen=True)
class QuotaNeed:
    """GPUs of one quota metric that the stack's pools reach at their maximum size, in ``region``."""

    metric: str
    region: str
    gpus: int
    pools: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """As ``gpurt plan --json`` writes it."""
        return {"metric": self.metric, "region": self.region, "gpus": self.gpus, "pools": list(self.pools)}


def gpu_quota_needs(resources: Iterable[Resource], region: str) -> tuple[QuotaNeed, ...]:
    """Per quota metric, the GPUs every GPU node pool among ``resources`` needs at its maximum, in ``region``."""
    needs: dict[str, tuple[int, list[str]]] = {}
    for resource in resources:
        if not resource.custom or resource.type != NODE_POOL:
            continue
        node: Mapping[str, Any] = lookup(resource.props, "nodeConfig") or {}
        spot = bool(lookup(node, "spot") or lookup(node, "preemptible"))
        most_nodes = node_counts(resource.props)[1]
        for accelerator in lookup(node, "guestAccelerators") or []:
            metric = quota_metric(str(accelerator.get("type")), spot)
            gpus, pools = needs.get(metric, (0, []))
            needs[metric] = (gpus + most_nodes * int(accelerator.get("count") or 0),
                             [*pools, str(lookup(resource.props, "name"))])
    return tuple(QuotaNeed(metric, region, gpus, tuple(pools)) for metric, (gpus, pools) in sorted(needs.items()))
