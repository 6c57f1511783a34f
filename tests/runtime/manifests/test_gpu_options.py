"""GPU pool options end to end: config validation names the key, GKE gets the right inputs, the Dask
workers of a shared or partitioned pool advertise the node's GPU slots, and the policy checks any pool."""

from __future__ import annotations

import copy
from typing import Any

import pulumi_gcp as gcp
import pytest
import yaml

from components.config import ConfigError, StackConfig, parse_stack_config
from components.dask import worker_pools
from components.gke import GkeCluster, GkeClusterArgs
from components.policy import rules
from components.rendered import Resource
from components.review.plan import REPO_ROOT
from runtime.manifests import dask as manifests
from runtime.manifests import gpu_options
from runtime.protocol import contract
from tests.components.infra import named, run
from tests.components.sdk_inputs import unknown_inputs

POOL_TYPE = "gcp:container/nodePool:NodePool"
A100 = {"machineType": "a2-highgpu-1g", "acceleratorType": "nvidia-tesla-a100"}
H100 = {"machineType": "a3-highgpu-1g", "acceleratorType": "nvidia-h100-80gb"}


def _stack_raw() -> tuple[dict[str, Any], str, str]:
    values = yaml.safe_load((REPO_ROOT / "Pulumi.production.yaml").read_text())["config"]
    raw = {key.split(":", 1)[1]: value for key, value in values.items() if key.startswith("gpu-runtime:")}
    return raw, values["gcp:project"], values["gcp:region"]


def _config(**pool: Any) -> StackConfig:
    """Production's config with its first (A100) pool changed by ``pool``."""
    raw, project, region = _stack_raw()
    raw = copy.deepcopy(raw)
    raw["gpuPools"][0].update(pool)
    return parse_stack_config(raw, project, region)


def _error(**pool: Any) -> str:
    with pytest.raises(ConfigError) as info:
        _config(**pool)
    return str(info.value)


# --- config validation: valid cases ------------------------------------------------------------------

_T4_SHARED = {"machineType": "n1-standard-8", "acceleratorType": "nvidia-tesla-t4", "spot": True,
              "gpuSharing": {"maxSharedClientsPerGpu": 4}}


@pytest.mark.parametrize(
    ("pool", "slots"),
    [
        ({}, 1),
        (_T4_SHARED, 4),
        ({**_T4_SHARED, "acceleratorCount": 2, "gpuSharing": {"strategy": "MPS", "maxSharedClientsPerGpu": 3}}, 6),
        ({"gpuPartitionSize": "1g.5gb"}, 7),
        ({"gpuPartitionSize": "3g.20gb", "gpuSharing": {"maxSharedClientsPerGpu": 2, "declared": True}}, 4),
        ({**H100, "gpuPartitionSize": "1g.20gb"}, 4),
        # Queued pools count maxNodes in total (GKE's guide sets --total-max-nodes): 4 nodes, 4 workers.
        ({"queuedProvisioning": True, "daskWorkersMax": 4}, 1),
        ({"queuedProvisioning": True, "maxRunDurationSeconds": 86400, "daskWorkersMax": 4}, 1),
        ({"machineType": "a3-megagpu-8g", "acceleratorType": "nvidia-h100-mega-80gb", "acceleratorCount": 8,
          "gpuPartitionSize": "3g.40gb"}, 16),
        ({"machineType": "a3-ultragpu-8g", "acceleratorType": "nvidia-h200-141gb", "acceleratorCount": 8,
          "gpuPartitionSize": "1g.18gb"}, 56),
        ({"reservation": {"type": "SPECIFIC_RESERVATION", "name": "a100-reservation"}}, 1),
        ({"reservation": {"type": "ANY_RESERVATION"}}, 1),
        ({"compactPlacement": True, "zones": ["us-central1-a"], "daskWorkersMax": 4}, 1),
    ],
)
def test_pool_options_gke_accepts_are_valid(pool: dict[str, Any], slots: int) -> None:
    config = _config(**pool)
    assert config.gpu_pools[0].workers_per_node == slots


# --- config validation: each bad combination names the key and why --------------------------------------


@pytest.mark.parametrize(
    ("pool", "expected"),
    [
        ({"gpuSharing": {"strategy": "SLICING", "maxSharedClientsPerGpu": 2}}, "gpuSharing.strategy: 'SLICING'"),
        ({"gpuSharing": {"maxSharedClientsPerGpu": 49}}, "gpuSharing.maxSharedClientsPerGpu: 49 is outside 2-48"),
        ({"gpuSharing": {"maxSharedClientsPerGpu": 1}}, "gpuSharing.maxSharedClientsPerGpu: 1"),
        ({"gpuSharing": {"strategy": "MPS", "maxSharedClientsPerGpu": 2}, "gpuPartitionSize": "1g.5gb"},
         "MPS cannot run on MIG partitions"),
        ({"gpuPartitionSize": "1g.10gb"}, "gpuPartitionSize: '1g.10gb' is not a partition of nvidia-tesla-a100"),
        ({**_T4_SHARED, "gpuSharing": None, "gpuPartitionSize": "1g.5gb"},
         "gpuPartitionSize: nvidia-tesla-t4 has no multi-instance GPU partitions"),
        ({"queuedProvisioning": True, "minNodes": 1}, "queuedProvisioning: needs minNodes 0"),
        ({"queuedProvisioning": True, "spot": True}, "queuedProvisioning: cannot use spot VMs"),
        ({"queuedProvisioning": True, "reservation": {"type": "ANY_RESERVATION"}},
         "queuedProvisioning: needs reservation type NO_RESERVATION"),
        ({"queuedProvisioning": True, "daskWorkersMin": 1}, "daskWorkersMin must be 0 with queuedProvisioning"),
        ({"maxRunDurationSeconds": 3600}, "maxRunDurationSeconds applies to queued pools only"),
        ({"queuedProvisioning": True, "maxRunDurationSeconds": 604801},
         "maxRunDurationSeconds: is 604801, but must be at most 604800"),
        ({"reservation": {"type": "SPECIFIC_RESERVATION"}}, "reservation.name: SPECIFIC_RESERVATION needs"),
        ({"reservation": {"type": "ANY_RESERVATION", "name": "r"}}, "reservation.name: only SPECIFIC_RESERVATION"),
        ({"reservation": {"type": "SOME"}}, "reservation.type: 'SOME'"),
        ({"reservation": {"type": "SPECIFIC_RESERVATION", "name": "r"}, "spot": True},
         "reservation: spot VMs cannot consume a specific reservation"),
        ({**_T4_SHARED, "gpuSharing": None, "compactPlacement": True, "zones": ["us-central1-a"], "daskWorkersMax": 4},
         "compactPlacement: machine type n1-standard-8 does not support compact placement"),
        ({"compactPlacement": True, "zones": []},
         "gpuPools[a100].compactPlacement: places nodes close together in one zone; "
         "the pool spans 4 zones"),
        ({"compactPlacement": True, "zones": ["us-central1-a", "us-central1-b"], "daskWorkersMax": 8},
         "compactPlacement: places nodes close together in one zone; the pool spans 2 zones"),
        ({"gpuSharing": {"maxSharedClientsPerGpu": 2, "clients": 3}}, "gpuSharing.clients"),
        # Sharing multiplies the workers a pool can hold, never the nodes: 4 nodes x 4 zones x 1 slot = 16.
        ({"daskWorkersMax": 17}, "daskWorkersMax 17 exceeds the pool's node capacity 16"),
        # Queued pools: total limits, so four zones do not multiply maxNodes.
        ({"queuedProvisioning": True, "daskWorkersMax": 5},
         "daskWorkersMax 5 exceeds the pool's node capacity 4 (maxNodes 4 in total x 1 worker(s) per node)"),
        # GKE's tooling refuses compact placement on queued (flex-start) pools.
        ({"queuedProvisioning": True, "compactPlacement": True, "zones": ["us-central1-a"], "daskWorkersMax": 4},
         "compactPlacement: cannot be combined with queuedProvisioning"),
        ({"machineType": "a3-ultragpu-8g", "acceleratorType": "nvidia-h200-141gb", "acceleratorCount": 8,
          "gpuPartitionSize": "1g.10gb"}, "gpuPartitionSize: '1g.10gb' is not a partition of nvidia-h200-141gb"),
    ],
)
def test_bad_pool_options_name_the_key_and_why(pool: dict[str, Any], expected: str) -> None:
    assert expected in _error(**pool)


def test_shared_pool_capacity_counts_slots() -> None:
    # 4 nodes x 4 zones x (7 MIG partitions x 2 shared clients) = 224 workers at most.
    share = {"gpuPartitionSize": "1g.5gb", "gpuSharing": {"maxSharedClientsPerGpu": 2, "declared": True}}
    assert _config(**share, daskWorkersMax=224).gpu_pools[0].workers_per_node == 14
    assert "capacity 224" in _error(**share, daskWorkersMax=225)


# --- GKE inputs (one render of a stack holding every kind of pool) ------------------------------------------

_RENDERED_POOLS: dict[str, dict[str, Any]] = {
    "mig": {"gpuPartitionSize": "2g.10gb", "gpuSharing": {"maxSharedClientsPerGpu": 3, "declared": True}},
    "queued": {"queuedProvisioning": True, "daskWorkersMax": 4},
    "reserved": {"reservation": {"type": "SPECIFIC_RESERVATION", "name": "projects/p/reservations/a100"},
                 "compactPlacement": True, "zones": ["us-central1-c"], "daskWorkersMax": 4},
    "t4shared": {**_T4_SHARED, "daskWorkersMax": 16},
}


@pytest.fixture(scope="module")
def rendered() -> dict[str, dict[str, Any]]:
    """Node-pool inputs by pool name, from one GkeCluster render."""
    raw, project, region = _stack_raw()
    base = raw["gpuPools"][0]
    raw = {**raw, "gpuPools": [{**base, "name": name, **pool} for name, pool in _RENDERED_POOLS.items()]}
    config = parse_stack_config(raw, project, region)
    recording = run(lambda: GkeCluster("gke", GkeClusterArgs(config=config)), project=project, region=region)
    return {name: dict(named(recording, POOL_TYPE, f"gke-gpu-{name}").props) for name in _RENDERED_POOLS}


def test_every_rendered_option_is_an_input_the_sdk_declares(rendered: dict[str, dict[str, Any]]) -> None:
    # The committed stacks do not use every option, so the stacks' own SDK walk does not see these inputs.
    for name, props in rendered.items():
        assert unknown_inputs(gcp.container.NodePool, props) == [], name


def test_gke_renders_mig_partitions_with_declared_time_sharing(rendered: dict[str, dict[str, Any]]) -> None:
    props = rendered["mig"]
    [accelerator] = props["nodeConfig"]["guestAccelerators"]
    assert accelerator == {
        "type": "nvidia-tesla-a100", "count": 1, "gpuPartitionSize": "2g.10gb",
        "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"},
        "gpuSharingConfig": {"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": 3},
    }
    key, value = contract.GPU_SHARING_DECLARED_LABEL
    assert props["nodeConfig"]["resourceLabels"] == {**contract.GCP_LABELS, key: value}
    assert "queuedProvisioning" not in props and "placementPolicy" not in props
    assert props["management"]["autoRepair"] is True


def test_gke_renders_queued_provisioning_without_reservation_or_repair(rendered: dict[str, dict[str, Any]]) -> None:
    props = rendered["queued"]
    assert props["queuedProvisioning"] == {"enabled": True}
    assert props["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert props["management"] == {"autoRepair": False, "autoUpgrade": True}
    # As GKE's queued-provisioning guide creates the pool: flex-start, total limits over the zones.
    assert props["nodeConfig"]["flexStart"] is True
    assert props["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 4, "locationPolicy": "ANY"}
    assert props["nodeConfig"]["resourceLabels"] == contract.GCP_LABELS


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda p: p["nodeConfig"].pop("flexStart"), "queuedProvisioning: needs flex-start VMs"),
        (lambda p: p.update(placementPolicy={"type": "COMPACT"}, nodeLocations=["us-central1-a"]),
         "compactPlacement: cannot be combined with queuedProvisioning"),
        (lambda p: p.update(autoscaling={"minNodeCount": 0, "maxNodeCount": 4}),
         "queuedProvisioning: needs total node limits"),
    ],
)
def test_the_policy_refuses_queued_pools_google_refuses(rendered: dict[str, dict[str, Any]], change: Any,
                                                        expected: str) -> None:
    props = copy.deepcopy(rendered["queued"])
    assert rules.check_gpu_pool_options(Resource(POOL_TYPE, "gke-gpu-queued", props)) == []
    change(props)
    assert expected in "; ".join(rules.check_gpu_pool_options(Resource(POOL_TYPE, "gke-gpu-queued", props)))


def test_gpu_pools_stream_their_images(rendered: dict[str, dict[str, Any]]) -> None:
    for props in rendered.values():
        assert props["nodeConfig"]["gcfsConfig"] == {"enabled": True}


def test_gke_renders_a_specific_reservation_and_compact_placement(rendered: dict[str, dict[str, Any]]) -> None:
    props = rendered["reserved"]
    assert props["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": gpu_options.RESERVATION_NAME_KEY, "values": ["projects/p/reservations/a100"],
    }
    assert props["placementPolicy"] == {"type": "COMPACT"}
    assert props["nodeLocations"] == ["us-central1-c"]


def test_gke_renders_time_sharing_of_a_t4_undeclared(rendered: dict[str, dict[str, Any]]) -> None:
    props = rendered["t4shared"]
    [accelerator] = props["nodeConfig"]["guestAccelerators"]
    assert accelerator["gpuSharingConfig"] == {"gpuSharingStrategy": "TIME_SHARING", "maxSharedClientsPerGpu": 4}
    assert "gpuPartitionSize" not in accelerator
    assert props["nodeConfig"]["spot"] is True and props["nodeConfig"]["resourceLabels"] == contract.GCP_LABELS


# --- Dask workers ----------------------------------------------------------------------------------------


def _advertised_per_node(pool: manifests.WorkerPoolSpec, workers_per_node: int) -> int:
    """GPU resources the workers of one full node advertise, read from the worker command they run."""
    command = manifests.build_worker_spec(pool, "img")["spec"]["containers"][0]["args"]
    resource, amount = command[command.index("--resources") + 1].split("=")
    assert resource == contract.DASK_GPU_RESOURCE
    claimed = int(pool.resources.to_manifest()["limits"][contract.GPU_RESOURCE])
    assert claimed == int(amount) == 1 or workers_per_node == 1
    return workers_per_node * int(amount)


@pytest.mark.parametrize(
    ("pool", "per_node"),
    [
        ({}, 1),
        ({"acceleratorCount": 2, "machineType": "a2-highgpu-2g", "daskWorkersMax": 16}, 2),
        ({"gpuSharing": {"maxSharedClientsPerGpu": 4, "declared": True}}, 4),
        ({"gpuPartitionSize": "1g.5gb"}, 7),
        ({"acceleratorCount": 2, "machineType": "a2-highgpu-2g", "gpuPartitionSize": "3g.20gb"}, 4),
    ],
)
def test_workers_of_a_node_advertise_its_gpu_slots(pool: dict[str, Any], per_node: int) -> None:
    config_pool = _config(**pool).gpu_pools[0]
    [spec] = worker_pools([config_pool])
    # GKE: accelerator count x MIG partitions per GPU x shared clients, each a one-GPU container.
    slots = config_pool.accelerator_count * gpu_options.gpu_slots_per_gpu(
        config_pool.accelerator_type, config_pool.gpu_partition_size,
        config_pool.gpu_sharing.max_shared_clients_per_gpu if config_pool.gpu_sharing else None)
    assert slots == per_node
    assert _advertised_per_node(spec, config_pool.workers_per_node) == per_node


def test_shared_workers_split_the_node_and_select_its_sharing_labels() -> None:
    whole = worker_pools([_config().gpu_pools[0]])[0]
    [shared] = worker_pools([_config(gpuPartitionSize="1g.5gb", gpuSharing={"maxSharedClientsPerGpu": 2,
                                                                           "declared": True}).gpu_pools[0]])
    # a2-highgpu-1g: 12 vCPUs; 14 workers share three quarters of it.
    assert (whole.resources.cpu_limit, shared.resources.cpu_limit) == ("9000m", "642m")
    selector = manifests.build_worker_spec(shared, "img")["spec"]["nodeSelector"]
    assert selector[gpu_options.PARTITION_SIZE_LABEL] == "1g.5gb"
    assert selector[gpu_options.SHARING_STRATEGY_LABEL] == "time-sharing"
    assert selector[gpu_options.MAX_SHARED_CLIENTS_LABEL] == "2"
    assert gpu_options.PARTITION_SIZE_LABEL not in manifests.build_worker_spec(whole, "img")["spec"]["nodeSelector"]


# --- policy ----------------------------------------------------------------------------------------------


def _subject(props: dict[str, Any]) -> Resource:
    return Resource(POOL_TYPE, "gke-gpu-pool", props)


def test_policy_passes_what_the_config_accepts(rendered: dict[str, dict[str, Any]]) -> None:
    for name, props in rendered.items():
        assert rules.check_gpu_pool_options(_subject(props)) == [], name
        assert rules.check_large_gpu_sharing_declared(_subject(props)) == [], name


def test_time_sharing_an_a100_needs_the_declaration(rendered: dict[str, dict[str, Any]]) -> None:
    props = {**rendered["mig"], "nodeConfig": {**rendered["mig"]["nodeConfig"], "resourceLabels": contract.GCP_LABELS}}
    [problem] = rules.check_large_gpu_sharing_declared(_subject(props))
    assert "TIME_SHARING on nvidia-tesla-a100 without the declaration label gpu-sharing=declared" in problem
    # A T4 pool may share without declaring it (asserted above over the undeclared t4shared pool).
    assert rendered["t4shared"]["nodeConfig"]["resourceLabels"] == contract.GCP_LABELS


def test_policy_catches_a_pool_gke_would_refuse(rendered: dict[str, dict[str, Any]]) -> None:
    props = {**rendered["queued"], "management": {"autoRepair": True}}
    props["nodeConfig"] = {**props["nodeConfig"], "spot": True,
                           "guestAccelerators": [{"type": "nvidia-tesla-a100", "count": 1, "gpuPartitionSize": "9g",
                                                  "gpuDriverInstallationConfig": {
                                                      "gpuDriverVersion": "INSTALLATION_DISABLED"}}]}
    assert rules.check_gpu_pool_options(_subject(props)) == [
        "gpuPartitionSize: needs GKE-managed GPU drivers (gpu_driver_installation_config)",
        "gpuPartitionSize: '9g' is not a partition of nvidia-tesla-a100: 1g.5gb, 2g.10gb, 3g.20gb, 7g.40gb",
        "queuedProvisioning: cannot use spot VMs (it is a provisioning model of its own)",
        "queuedProvisioning: needs node auto-repair off (GKE refuses it on queued pools)",
    ]
    compact = {**rendered["reserved"], "nodeLocations": ["us-central1-a", "us-central1-b"]}
    assert rules.check_gpu_pool_options(_subject(compact)) == [
        "compactPlacement: places nodes close together in one zone; the pool spans 2 zones"]


def test_policy_ignores_cpu_pools() -> None:
    props = {"nodeConfig": {"machineType": "e2-standard-4"}, "placementPolicy": {"type": "COMPACT"}}
    assert rules.check_gpu_pool_options(Resource(POOL_TYPE, "system", props)) == []


def test_gpu_options_module_is_pure() -> None:
    # The policy bundle ships it on its own: it may import nothing of the project but the standard library.
    source = (REPO_ROOT / "runtime" / "manifests" / "gpu_options.py").read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert imports == ["from __future__ import annotations", "from dataclasses import dataclass",
                       "from typing import Final"]

