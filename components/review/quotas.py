"""Every quota a stack needs, from its rendered node pools and its Vertex AI overflow: what a project must grant.

A new project's quotas are small (its GPU quotas, and often the global ``GPUS_ALL_REGIONS``, are 0), and a GKE
pool cannot grow past any of the quotas its nodes count against. Compute Engine meters each node
(https://cloud.google.com/compute/resource-usage):

- its vCPUs per region: E2 and N1 machines under ``CPUS``, every other machine series under a quota of its
  own (``A2_CPUS``, ``N2_CPUS``, ``G2_CPUS``, ...), and all of them together under the global ``CPUS_ALL_REGIONS``
  ("CPU quota"). Spot nodes are counted here as well: a project without preemptible CPU quota spends its
  standard quota on them ("Preemptible quotas");
- its GPUs per region and model (``NVIDIA_T4_GPUS``), spot GPUs under ``PREEMPTIBLE_…`` ("GPU quota"), and every
  GPU of every region under the global ``GPUS_ALL_REGIONS``;
- its boot disk per region: ``pd-balanced`` and ``pd-ssd`` under ``SSD_TOTAL_GB``, ``pd-standard`` under
  ``DISKS_TOTAL_GB`` ("Disk quota").

Vertex AI counts the overflow's custom-job GPUs under its own regional quota,
``aiplatform.googleapis.com/custom_model_training_<model>_gpus`` (https://cloud.google.com/vertex-ai/docs/quotas,
"Custom-trained model quotas"), apart from Compute Engine's. One job at a time needs one machine's GPUs.

A stack's need is each pool's per-node amount times its most nodes over all its zones, added up per quota;
``minimum`` is the same at the pools' least nodes (below it, the deploy itself fails to create the pools).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from components.config import VertexConfig
from components.rendered import NODE_POOL, Resource, lookup
from components.review.cost import node_counts

COMPUTE: Final = "compute.googleapis.com"
VERTEX_AI: Final = "aiplatform.googleapis.com"
GLOBAL: Final = "global"
# Machine series whose vCPUs count against the regional CPUS quota; each other series has <SERIES>_CPUS.
_CPUS_SERIES: Final = frozenset({"e2", "n1"})
# The vCPUs of accelerator-optimized machine types, whose names carry their GPU count, not their vCPUs
# (https://cloud.google.com/compute/docs/accelerator-optimized-machines: A2 has 12 vCPUs per A100, A3 208 per
# 8 H100). Other predefined and custom types end in their vCPUs (n1-standard-8, g2-standard-8, n1-custom-8-30720).
_ACCELERATOR_VCPUS_PER_GPU: Final = {"a2-highgpu": 12, "a2-ultragpu": 12, "a2-megagpu": 6, "a3-highgpu": 26,
                                     "a3-megagpu": 26}
_GPU_TYPE_RE: Final = re.compile(r"^(?P<family>[a-z0-9]+-[a-z]+gpu)-(?P<gpus>\d+)g$")
_VCPU_TYPE_RE: Final = re.compile(r"^[a-z0-9]+-(?:[a-z]+-(?P<vcpus>\d+)|custom-(?P<custom>\d+)-\d+)(?:-ext)?$")
SSD_DISK_TYPES: Final = frozenset({"pd-balanced", "pd-ssd"})
# GKE's default boot disk when a pool names none (the node_config field's default).
DEFAULT_DISK_TYPE: Final = "pd-balanced"


def quota_metric(accelerator: str, spot: bool = False) -> str:
    """The Compute Engine quota metric of a GKE accelerator type: ``nvidia-tesla-t4`` -> ``NVIDIA_T4_GPUS``."""
    model = accelerator.lower().removeprefix("nvidia-").removeprefix("tesla-").replace("-", "_").upper()
    return f"{'PREEMPTIBLE_' if spot else ''}NVIDIA_{model}_GPUS"


def training_quota_metric(accelerator: str) -> str:
    """The Vertex AI custom-training quota metric of a Vertex accelerator type (its quota is Vertex AI's own, not
    Compute Engine's): ``NVIDIA_TESLA_T4`` -> ``aiplatform.googleapis.com/custom_model_training_nvidia_t4_gpus``."""
    model = accelerator.upper().removeprefix("NVIDIA_").removeprefix("TESLA_").lower()
    return f"{VERTEX_AI}/custom_model_training_nvidia_{model}_gpus"


def machine_vcpus(machine_type: str) -> int:
    """The vCPUs of a Compute Engine machine type; ValueError for a name whose vCPUs cannot be told from it."""
    gpu_type = _GPU_TYPE_RE.match(machine_type)
    if gpu_type and gpu_type["family"] in _ACCELERATOR_VCPUS_PER_GPU:
        return _ACCELERATOR_VCPUS_PER_GPU[gpu_type["family"]] * int(gpu_type["gpus"])
    plain = _VCPU_TYPE_RE.match(machine_type)
    if plain is None or gpu_type:
        raise ValueError(f"cannot tell the vCPUs of machine type {machine_type!r} "
                         "(add it to components/review/quotas.py)")
    return int(plain["vcpus"] or plain["custom"])


def cpu_quota_metric(machine_type: str) -> str:
    """The regional CPU quota a machine type counts against: ``CPUS`` for E2 and N1, ``A2_CPUS`` for A2, ..."""
    series = machine_type.split("-", 1)[0].lower()
    return "CPUS" if series in _CPUS_SERIES else f"{series.upper()}_CPUS"


def disk_quota_metric(disk_type: str) -> str:
    """The regional quota a persistent boot disk counts against (balanced and SSD disks share one)."""
    return "SSD_TOTAL_GB" if disk_type in SSD_DISK_TYPES else "DISKS_TOTAL_GB"


@dataclass(frozen=True)
class QuotaNeed:
    """How much of one quota the stack reaches: ``amount`` at the pools' maxima, ``minimum`` at their least nodes."""

    metric: str
    """The quota's metric as its service reports it (``CPUS``, ``NVIDIA_T4_GPUS``, ``aiplatform.googleapis.com/…``)."""
    scope: str
    """The region it is metered in, or ``global``."""
    amount: int
    minimum: int
    unit: str
    """``vCPUs``, ``GPUs`` or ``GB``."""
    pools: tuple[str, ...]
    service: str = COMPUTE

    @property
    def quota_id(self) -> str:
        """The quota's ID in the Cloud Quotas API, which a quota request names.

        Compute Engine's follow its metric (``CPUS`` -> ``CPUS-per-project-region``, ``GPUS_ALL_REGIONS`` ->
        ``GPUS-ALL-REGIONS-per-project``), Vertex AI's are CamelCase
        (``CustomModelTrainingNvidiaT4GPUsPerProjectPerRegion``) (https://cloud.google.com/docs/quotas/view-manage).
        """
        if self.service == VERTEX_AI:
            words = self.metric.rsplit("/", 1)[-1].removesuffix("_gpus").split("_")
            camel = "".join(w.upper() if any(c.isdigit() for c in w) else w.capitalize() for w in words)
            return f"{camel}GPUsPerProjectPerRegion"
        return f"{self.metric.replace('_', '-')}-per-project{'' if self.scope == GLOBAL else '-region'}"

    def request_command(self, project: str) -> str:
        """The gcloud command that asks for this quota at the stack's need (``gcloud quotas preferences create``)."""
        where = "" if self.scope == GLOBAL else f" --dimensions=region={self.scope}"
        return (f"gcloud quotas preferences create --project={project} --service={self.service} "
                f"--quota-id={self.quota_id} --preferred-value={self.amount}{where}")

    def to_json(self) -> dict[str, Any]:
        """As ``gpurt plan --json`` writes it."""
        return {"metric": self.metric, "service": self.service, "scope": self.scope, "amount": self.amount,
                "minimum": self.minimum, "unit": self.unit, "pools": list(self.pools), "quota_id": self.quota_id}


@dataclass
class _Tally:
    amount: int = 0
    minimum: int = 0
    pools: tuple[str, ...] = ()

    def add(self, per_node: int, nodes: tuple[int, int], pool: str) -> None:
        self.minimum += per_node * nodes[0]
        self.amount += per_node * nodes[1]
        if pool not in self.pools:
            self.pools = (*self.pools, pool)


def quota_needs(
    resources: Iterable[Resource], region: str, vertex: VertexConfig | None = None
) -> tuple[QuotaNeed, ...]:
    """Every quota the node pools among ``resources`` reach in ``region``, and, when the stack submits Vertex AI
    custom jobs (``vertex``, given only then), the custom-training GPUs of one such job."""
    tallies: dict[tuple[str, str, str], _Tally] = {}

    def tally(metric: str, scope: str, unit: str) -> _Tally:
        return tallies.setdefault((metric, scope, unit), _Tally())

    for resource in resources:
        if not resource.custom or resource.type != NODE_POOL:
            continue
        node: Mapping[str, Any] = lookup(resource.props, "nodeConfig") or {}
        pool = str(lookup(resource.props, "name"))
        nodes = node_counts(resource.props)
        machine_type = str(lookup(node, "machineType") or "")
        vcpus = machine_vcpus(machine_type)
        tally(cpu_quota_metric(machine_type), region, "vCPUs").add(vcpus, nodes, pool)
        tally("CPUS_ALL_REGIONS", GLOBAL, "vCPUs").add(vcpus, nodes, pool)
        disk = str(lookup(node, "diskType") or DEFAULT_DISK_TYPE)
        tally(disk_quota_metric(disk), region, "GB").add(int(lookup(node, "diskSizeGb") or 0), nodes, pool)
        spot = bool(lookup(node, "spot") or lookup(node, "preemptible"))
        for accelerator in lookup(node, "guestAccelerators") or []:
            gpus = int(accelerator.get("count") or 0)
            tally(quota_metric(str(accelerator.get("type")), spot), region, "GPUs").add(gpus, nodes, pool)
            tally("GPUS_ALL_REGIONS", GLOBAL, "GPUs").add(gpus, nodes, pool)
    needs = [QuotaNeed(metric, scope, t.amount, t.minimum, unit, t.pools)
             for (metric, scope, unit), t in tallies.items()]
    if vertex is not None:
        needs.append(QuotaNeed(training_quota_metric(vertex.accelerator_type), region, vertex.accelerator_count, 0,
                               "GPUs", ("vertex",), VERTEX_AI))
    return tuple(sorted(needs, key=lambda n: (n.service, n.scope == GLOBAL, n.metric)))
