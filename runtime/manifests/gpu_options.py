"""What GKE accepts for a GPU node pool's sharing, partitioning, provisioning, reservation and placement.

One pure module (standard library only) holds GKE's rules, so the stack config (``components.config``),
which names the offending key, and the policy pack (``components.policy.rules``), which checks any node
pool a program declares, apply the same ones. It also says how many GPU resources a node of a shared or
partitioned pool advertises, which the Dask worker groups must match. See docs/infrastructure.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

TIME_SHARING: Final = "TIME_SHARING"
MPS: Final = "MPS"
SHARING_STRATEGIES: Final = (TIME_SHARING, MPS)
# GKE caps the containers sharing one physical GPU at 48, for time-sharing and MPS alike; one client is no sharing.
MIN_SHARED_CLIENTS: Final = 2
MAX_SHARED_CLIENTS: Final = 48
# The node labels GKE puts on shared and partitioned nodes; a pod selects them to land on the right kind.
SHARING_STRATEGY_LABEL: Final = "cloud.google.com/gke-gpu-sharing-strategy"
MAX_SHARED_CLIENTS_LABEL: Final = "cloud.google.com/gke-max-shared-clients-per-gpu"
PARTITION_SIZE_LABEL: Final = "cloud.google.com/gke-gpu-partition-size"
# GKE spells the strategy in lower case in the node label (time-sharing, mps).
STRATEGY_LABEL_VALUES: Final = {TIME_SHARING: "time-sharing", MPS: "mps"}

# Multi-instance GPU profiles GKE offers per accelerator, and how many partitions each yields per GPU
# (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus-multi; counts from NVIDIA's MIG user guide).
# A3 Mega carries the same H100 as A3 High under its own accelerator type; A3 Ultra carries the H200.
MIG_PARTITIONS: Final[dict[str, dict[str, int]]] = {
    "nvidia-tesla-a100": {"1g.5gb": 7, "2g.10gb": 3, "3g.20gb": 2, "7g.40gb": 1},
    "nvidia-a100-80gb": {"1g.10gb": 7, "2g.20gb": 3, "3g.40gb": 2, "7g.80gb": 1},
    "nvidia-h100-80gb": {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "7g.80gb": 1},
    "nvidia-h100-mega-80gb": {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "7g.80gb": 1},
    "nvidia-h200-141gb": {"1g.18gb": 7, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "7g.141gb": 1},
}
# The large GPUs, which carry the latency-bound work: shared among containers only where a stack declares it
# (MIG, with its isolated memory and compute, is the way to split them).
LARGE_GPUS: Final = tuple(MIG_PARTITIONS)

NO_RESERVATION: Final = "NO_RESERVATION"
ANY_RESERVATION: Final = "ANY_RESERVATION"
SPECIFIC_RESERVATION: Final = "SPECIFIC_RESERVATION"
RESERVATION_TYPES: Final = (NO_RESERVATION, ANY_RESERVATION, SPECIFIC_RESERVATION)
# The key GKE's reservation affinity uses to name a specific reservation.
RESERVATION_NAME_KEY: Final = "compute.googleapis.com/reservation-name"

# GKE's node label naming the node pool a node belongs to; the project names each GPU node pool gpu-<pool>.
NODE_POOL_LABEL: Final = "cloud.google.com/gke-nodepool"
GPU_NODE_POOL_PREFIX: Final = "gpu-"
# A ProvisioningRequest's nodes live at most this long (maxRunDurationSeconds), which is also GKE's default: 7 days.
MAX_RUN_DURATION_S: Final = 7 * 24 * 3600

COMPACT: Final = "COMPACT"
# Machine families whose VMs compact placement policies accept (N1, E2 and the rest are refused).
COMPACT_PLACEMENT_FAMILIES: Final = (
    "a2-", "a3-", "a4-", "c2-", "c2d-", "c3-", "c3d-", "c4-", "c4d-", "g2-", "h3-", "n2-", "n2d-",
)


@dataclass(frozen=True)
class PoolOptions:
    """The facts of one GPU node pool that GKE's combination rules look at."""

    machine_type: str
    accelerator_type: str
    accelerator_count: int
    spot: bool
    min_nodes: int
    managed_driver: bool = True
    """GKE installs the NVIDIA driver (gpu_driver_installation_config)."""
    sharing_strategy: str | None = None
    max_shared_clients: int | None = None
    partition_size: str | None = None
    queued_provisioning: bool = False
    auto_repair: bool = True
    reservation_type: str | None = None
    reservation_name: str | None = None
    compact_placement: bool = False
    zone_count: int | None = None
    """Zones the pool spans; None when not known yet (checked later against the stack's zones)."""
    flex_start: bool = False
    """Flex-start VMs (``node_config.flex_start``), which GKE's queued provisioning requires."""
    total_limits: bool = True
    """The autoscaler's limits are totals over the zones (``totalMaxNodeCount``), not per zone."""


@dataclass(frozen=True)
class Problem:
    """A combination GKE refuses: the config key concerned and why."""

    key: str
    message: str


def _sharing(o: PoolOptions) -> list[Problem]:
    problems = []
    if o.sharing_strategy not in SHARING_STRATEGIES:
        problems.append(Problem("gpuSharing.strategy", f"{o.sharing_strategy!r} is not one of "
                                f"{', '.join(SHARING_STRATEGIES)}"))
    clients = o.max_shared_clients
    if clients is None or not MIN_SHARED_CLIENTS <= clients <= MAX_SHARED_CLIENTS:
        problems.append(Problem("gpuSharing.maxSharedClientsPerGpu", f"{clients!r} is outside "
                                f"{MIN_SHARED_CLIENTS}-{MAX_SHARED_CLIENTS} (GKE's limit per GPU)"))
    if o.sharing_strategy == MPS and o.partition_size:
        problems.append(Problem("gpuSharing.strategy", "MPS cannot run on MIG partitions; use TIME_SHARING "
                                "with gpuPartitionSize"))
    return problems


def _partition(o: PoolOptions) -> list[Problem]:
    sizes = MIG_PARTITIONS.get(o.accelerator_type)
    if sizes is None:
        return [Problem("gpuPartitionSize", f"{o.accelerator_type} has no multi-instance GPU partitions "
                        f"(only {', '.join(MIG_PARTITIONS)} do)")]
    if o.partition_size not in sizes:
        return [Problem("gpuPartitionSize", f"{o.partition_size!r} is not a partition of {o.accelerator_type}: "
                        f"{', '.join(sizes)}")]
    return []


def _queued(o: PoolOptions) -> list[Problem]:
    # Flex-start with queued provisioning hands out whole groups of nodes on request, then takes them back.
    problems = []
    if o.min_nodes != 0:
        problems.append(Problem("queuedProvisioning", f"needs minNodes 0 (queued nodes exist only while "
                                f"requested), not {o.min_nodes}"))
    if o.spot:
        problems.append(Problem("queuedProvisioning", "cannot use spot VMs (it is a provisioning model of its own)"))
    if o.reservation_type not in (None, NO_RESERVATION):
        problems.append(Problem("queuedProvisioning", f"needs reservation type {NO_RESERVATION}, not "
                                f"{o.reservation_type}"))
    if o.auto_repair:
        problems.append(Problem("queuedProvisioning", "needs node auto-repair off (GKE refuses it on queued pools)"))
    if not o.flex_start:
        problems.append(Problem("queuedProvisioning", "needs flex-start VMs (node_config.flex_start): GKE provisions "
                                "queued nodes only as flex-start"))
    if o.compact_placement:
        problems.append(Problem("compactPlacement", "cannot be combined with queuedProvisioning (GKE refuses "
                                "compact placement on flex-start queued pools)"))
    if not o.total_limits:
        problems.append(Problem("queuedProvisioning", "needs total node limits (totalMinNodeCount/"
                                "totalMaxNodeCount), not per-zone ones"))
    return problems


def _reservation(o: PoolOptions) -> list[Problem]:
    if o.reservation_type not in RESERVATION_TYPES:
        return [Problem("reservation.type", f"{o.reservation_type!r} is not one of {', '.join(RESERVATION_TYPES)}")]
    named = o.reservation_type == SPECIFIC_RESERVATION
    if named and not o.reservation_name:
        return [Problem("reservation.name", f"{SPECIFIC_RESERVATION} needs the reservation's name")]
    if not named and o.reservation_name:
        return [Problem("reservation.name", f"only {SPECIFIC_RESERVATION} names a reservation")]
    if named and o.spot:
        return [Problem("reservation", "spot VMs cannot consume a specific reservation")]
    return []


def _compact(o: PoolOptions) -> list[Problem]:
    problems = []
    if not o.machine_type.startswith(COMPACT_PLACEMENT_FAMILIES):
        families = ", ".join(f.rstrip("-").upper() for f in COMPACT_PLACEMENT_FAMILIES)
        problems.append(Problem("compactPlacement", f"machine type {o.machine_type} does not support compact "
                                f"placement (families: {families})"))
    if o.zone_count is not None and o.zone_count != 1:
        problems.append(Problem("compactPlacement", f"places nodes close together in one zone; the pool spans "
                                f"{o.zone_count} zones"))
    return problems


def check(o: PoolOptions) -> list[Problem]:
    """Every reason GKE would refuse this pool's GPU options (empty: accepted)."""
    problems = []
    if (o.sharing_strategy or o.partition_size) and not o.managed_driver:
        problems.append(Problem("gpuSharing" if o.sharing_strategy else "gpuPartitionSize",
                                "needs GKE-managed GPU drivers (gpu_driver_installation_config)"))
    if o.sharing_strategy is not None or o.max_shared_clients is not None:
        problems += _sharing(o)
    if o.partition_size is not None:
        problems += _partition(o)
    if o.queued_provisioning:
        problems += _queued(o)
    if o.reservation_type is not None or o.reservation_name is not None:
        problems += _reservation(o)
    if o.compact_placement:
        problems += _compact(o)
    return problems


def gpu_slots_per_gpu(accelerator_type: str, partition_size: str | None, max_shared_clients: int | None) -> int:
    """``nvidia.com/gpu`` resources one physical GPU shows: MIG partitions times shared clients (1 and 1 if off)."""
    partitions = MIG_PARTITIONS[accelerator_type][partition_size] if partition_size else 1
    return partitions * (max_shared_clients or 1)


def node_pool_name(pool: str) -> str:
    """The GKE node pool of the stack's GPU pool ``pool`` (what ``cloud.google.com/gke-nodepool`` says)."""
    return f"{GPU_NODE_POOL_PREFIX}{pool}"
