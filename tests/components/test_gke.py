"""GKE: private cluster with Workload Identity, and GPU pools exactly as the stack config says."""

from __future__ import annotations

import pulumi
import pytest
import yaml

from components.config import StackConfig
from components.gke import GkeCluster, GkeClusterArgs, render_kubeconfig
from components.review.plan import MASK, Recording
from tests.components.infra import children_of, named, of_type, run, stack_config

POOL_TYPE = "gcp:container/nodePool:NodePool"


def _run(config: StackConfig) -> Recording:
    def build() -> None:
        gke = GkeCluster("gke", GkeClusterArgs(config=config))
        pulumi.export("kubeconfig", gke.kubeconfig)
        pulumi.export("workload_pool", gke.workload_pool)

    return run(build, project=config.project, region=config.region)


@pytest.fixture(scope="module")
def production() -> tuple[StackConfig, Recording]:
    config = stack_config("production")
    return config, _run(config)


def test_cluster_is_private_with_workload_identity(production: tuple[StackConfig, Recording]) -> None:
    config, recording = production
    cluster = named(recording, "gcp:container/cluster:Cluster", "gke-cluster").props
    assert cluster["privateClusterConfig"]["enablePrivateNodes"] is True
    assert cluster["privateClusterConfig"]["masterIpv4CidrBlock"] == config.network.master_cidr
    assert cluster["workloadIdentityConfig"] == {"workloadPool": f"{config.project}.svc.id.goog"}
    assert cluster["enableShieldedNodes"] is True
    assert cluster["releaseChannel"] == {"channel": "REGULAR"}
    assert cluster["deletionProtection"] is True
    assert cluster["removeDefaultNodePool"] is True
    assert cluster["datapathProvider"] == "ADVANCED_DATAPATH"  # enforces the NetworkPolicies
    assert recording.outputs["workload_pool"] == f"{config.project}.svc.id.goog"


def test_gpu_pools_follow_config(production: tuple[StackConfig, Recording]) -> None:
    config, recording = production
    assert len(config.gpu_pools) == 3
    for pool in config.gpu_pools:
        props = named(recording, POOL_TYPE, f"gke-gpu-{pool.name}").props
        node = props["nodeConfig"]
        assert node["guestAccelerators"] == [{
            "type": pool.accelerator_type,
            "count": pool.accelerator_count,
            "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"},
        }]
        assert node["machineType"] == pool.machine_type
        assert node.get("spot", False) is pool.spot
        assert props["autoscaling"]["minNodeCount"] == 0
        assert props["autoscaling"]["maxNodeCount"] == pool.max_nodes
        assert props["nodeLocations"] == list(pool.zones)
        assert node["labels"]["nvidia.com/gpu"] == "true"
        assert node["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
        assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        assert node["shieldedInstanceConfig"] == {"enableSecureBoot": True, "enableIntegrityMonitoring": True}


def test_system_pool_is_cpu_only_and_untainted(production: tuple[StackConfig, Recording]) -> None:
    _, recording = production
    node = named(recording, POOL_TYPE, "gke-system").props["nodeConfig"]
    assert "guestAccelerators" not in node and "taints" not in node
    assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}


def test_nodes_use_their_own_least_privilege_account(production: tuple[StackConfig, Recording]) -> None:
    config, recording = production
    email = f"gpu-runtime-nodes@{config.project}.iam.gserviceaccount.com"
    assert {p.props["nodeConfig"]["serviceAccount"] for p in of_type(recording, POOL_TYPE)} == {email}
    roles = {r.props["role"] for r in of_type(recording, "gcp:projects/iAMMember:IAMMember")}
    assert "roles/editor" not in roles and "roles/artifactregistry.reader" in roles


def test_the_temporary_default_pool_boots_shielded_as_the_nodes_account(
        production: tuple[StackConfig, Recording]) -> None:
    config, recording = production
    cluster = named(recording, "gcp:container/cluster:Cluster", "gke-cluster")
    node = cluster.props["nodeConfig"]
    assert node["serviceAccount"] == f"gpu-runtime-nodes@{config.project}.iam.gserviceaccount.com"
    assert node["shieldedInstanceConfig"] == {"enableSecureBoot": True, "enableIntegrityMonitoring": True}
    assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert "nodeConfig" in cluster.ignore_changes  # replace-on-change: an existing cluster is not replaced for it


def test_image_streaming_has_what_a_custom_node_account_needs(production: tuple[StackConfig, Recording]) -> None:
    config, recording = production
    email = f"gpu-runtime-nodes@{config.project}.iam.gserviceaccount.com"
    streaming = [p for p in of_type(recording, POOL_TYPE) if p.props["nodeConfig"].get("gcfsConfig", {}).get("enabled")]
    assert streaming
    grants = {(r.props["role"], r.props["member"]) for r in of_type(recording, "gcp:projects/iAMMember:IAMMember")}
    assert ("roles/serviceusage.serviceUsageConsumer", f"serviceAccount:{email}") in grants


def test_network_has_secondary_ranges_and_nat(production: tuple[StackConfig, Recording]) -> None:
    config, recording = production
    subnet = named(recording, "gcp:compute/subnetwork:Subnetwork", "gke-subnet").props
    assert {r["rangeName"]: r["ipCidrRange"] for r in subnet["secondaryIpRanges"]} == {
        "pods": config.network.pods_cidr, "services": config.network.services_cidr,
    }
    assert subnet["privateIpGoogleAccess"] is True
    assert of_type(recording, "gcp:compute/routerNat:RouterNat")


def test_kubernetes_provider_gets_a_secret_kubeconfig(production: tuple[StackConfig, Recording]) -> None:
    _, recording = production
    [provider] = of_type(recording, "pulumi:providers:kubernetes")
    assert provider.shown["kubeconfig"] == MASK
    assert "gke-gcloud-auth-plugin" in provider.props["kubeconfig"]
    assert recording.outputs["kubeconfig"] == MASK
    assert {r.name for r in children_of(recording, "gke")} >= {"gke-cluster", "gke-system", "gke-k8s"}


def test_staging_is_spot_t4_without_deletion_protection() -> None:
    config = stack_config("staging")
    recording = _run(config)
    assert named(recording, "gcp:container/cluster:Cluster", "gke-cluster").props["deletionProtection"] is False
    [gpu] = [p for p in of_type(recording, POOL_TYPE) if p.name != "gke-system"]
    assert gpu.props["nodeConfig"]["guestAccelerators"][0]["type"] == "nvidia-tesla-t4"
    assert gpu.props["nodeConfig"]["spot"] is True


def test_control_plane_is_reached_through_its_iam_authenticated_dns_endpoint(
    production: tuple[StackConfig, Recording],
) -> None:
    _, recording = production
    cluster = named(recording, "gcp:container/cluster:Cluster", "gke-cluster").props
    assert cluster["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]["allowExternalTraffic"] is True
    # No public IP endpoint, and no address range stands in for the runners (they have none).
    assert cluster["privateClusterConfig"]["enablePrivateEndpoint"] is True
    assert cluster["masterAuthorizedNetworksConfig"].get("cidrBlocks", []) == []
    [provider] = of_type(recording, "pulumi:providers:kubernetes")
    server = yaml.safe_load(provider.props["kubeconfig"])["clusters"][0]["cluster"]["server"]
    assert server.startswith("https://gke-") and server.endswith(".us-central1.gke.goog")


def test_kubeconfig_uses_the_auth_plugin_and_no_credentials() -> None:
    text = render_kubeconfig("gke_p_r_c", "gke-1234.us-central1.gke.goog")
    doc = yaml.safe_load(text)
    assert doc["clusters"][0]["cluster"] == {"server": "https://gke-1234.us-central1.gke.goog"}
    user = doc["users"][0]["user"]
    assert user["exec"]["command"] == "gke-gcloud-auth-plugin"
    assert "token" not in user and "client-key-data" not in user


def test_gke_upgrades_only_in_the_stacks_window_and_gpu_pools_without_surge(
        production: tuple[StackConfig, Recording]) -> None:
    config, recording = production
    window = named(recording, "gcp:container/cluster:Cluster", "gke-cluster").props["maintenancePolicy"]
    assert window == {"recurringWindow": {"startTime": "2026-01-05T02:00:00Z", "endTime": "2026-01-05T08:00:00Z",
                                          "recurrence": "FREQ=WEEKLY;BYDAY=SA,SU"}}
    for pool in config.gpu_pools:
        upgrade = named(recording, POOL_TYPE, f"gke-gpu-{pool.name}").props["upgradeSettings"]
        assert upgrade == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}
