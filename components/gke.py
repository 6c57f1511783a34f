"""GKE: private VPC-native cluster, a CPU system pool, GPU pools from stack config, and a Kubernetes provider.

Why it is built this way (docs/infrastructure.md): the control plane has no public IP endpoint; people and CI
reach it through GKE's DNS-based endpoint, which Google authenticates with IAM (``container.clusters.connect``)
before a request reaches the API server, so no runner address needs to be known in advance. Nodes have no
public IPs (Cloud NAT gives them egress to pull images), pods reach Google APIs through Workload Identity
(``GKE_METADATA``), node images are shielded, GPU drivers are installed by GKE itself
(``gpu_driver_installation_config``; no extra device-plugin DaemonSet), and every GPU pool autoscales from
zero, carrying the GPU label and taint so that only pods which tolerate it land there. Dataplane V2 enforces
the NetworkPolicies of the workloads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.bootstrap import NODE_ACCOUNT_ID
from components.config import GpuPoolConfig, NetworkConfig, ReservationConfig, StackConfig, SystemPoolConfig
from components.iam import NODE_ROLES
from components.policy import rules
from runtime.manifests import gpu_options
from runtime.protocol import contract

# GKE system metrics (nodes, pods, containers) to Cloud Monitoring; GPU metrics come from our DCGM exporter.
MONITORING_COMPONENTS = ("SYSTEM_COMPONENTS",)
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# GKE maps the Kubernetes taint effect NoSchedule to this enum.
TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}
# "LATEST" installs the newest driver the node version supports; A100/H100 need recent CUDA anyway.
GPU_DRIVER_VERSION = "LATEST"
# Node label naming the pool, so a Dask worker group can pin itself to its own pool.
POOL_LABEL = "gpu-runtime/pool"
PODS_RANGE = "pods"
SERVICES_RANGE = "services"
# gke-gcloud-auth-plugin is the only supported kubectl credential plugin for GKE since 1.26. The DNS endpoint
# serves a publicly trusted certificate, so, like `gcloud container clusters get-credentials --dns-endpoint`, the
# kubeconfig carries no cluster CA.
_KUBECONFIG_TEMPLATE = """apiVersion: v1
kind: Config
clusters:
- name: {name}
  cluster:
    server: https://{endpoint}
contexts:
- name: {name}
  context:
    cluster: {name}
    user: {name}
current-context: {name}
users:
- name: {name}
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: gke-gcloud-auth-plugin
      installHint: Install gke-gcloud-auth-plugin (gcloud components install gke-gcloud-auth-plugin).
      provideClusterInfo: true
"""


def gpu_taint() -> gcp.container.NodePoolNodeConfigTaintArgs:
    """The contract's GPU taint in GKE's node-pool form."""
    return gcp.container.NodePoolNodeConfigTaintArgs(
        key=contract.GPU_TAINT_KEY, value=contract.GPU_TAINT_VALUE, effect=TAINT_EFFECTS[contract.GPU_TAINT_EFFECT]
    )


def render_kubeconfig(name: str, dns_endpoint: str) -> str:
    """A kubeconfig for the cluster's DNS endpoint that authenticates through gke-gcloud-auth-plugin (no static
    credentials)."""
    return _KUBECONFIG_TEMPLATE.format(name=name, endpoint=dns_endpoint)

# The cluster's name (`gpurt deploy-window` looks for GKE's operations on it).
CLUSTER_NAME: Final = "gpu-scheduler"


@dataclass
class GkeClusterArgs:
    """Inputs of the GKE component."""

    config: StackConfig
    """The stack's validated config: project, region, zones, network, pools, release channel, protection."""

    cluster_name: str = CLUSTER_NAME
    """Cluster name; the runbooks' kubectl context is gke_<project>_<region>_gpu-scheduler."""

    depends_on: list[pulumi.Resource] | None = None
    """Resources that must exist first (the container and compute APIs)."""


class GkeCluster(pulumi.ComponentResource):
    """VPC, Cloud NAT, private GKE cluster, system and GPU node pools, kubeconfig and a Kubernetes provider."""

    gpu_pools: dict[str, gcp.container.NodePool]

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        cfg = args.config
        # Recorded as the component's input so the policy pack sees which GPU pools the stack lets be replaced.
        super().__init__(rules.GKE_COMPONENT, name, {
            rules.REPLACE_ACK_INPUT: [gpu_options.node_pool_name(pool) for pool in cfg.replace_gpu_pools],
        }, opts)
        after_apis = pulumi.ResourceOptions(parent=self, depends_on=args.depends_on or [])
        self._name = name
        self._cfg = cfg

        self.network, self.subnet, self.nat = self._network(cfg.network, after_apis)
        self.node_service_account = self._node_service_account(after_apis)

        self.cluster = gcp.container.Cluster(
            f"{name}-cluster",
            name=args.cluster_name,
            project=cfg.project,
            location=cfg.region,
            node_locations=list(cfg.zones),
            network=self.network.id,
            subnetwork=self.subnet.id,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name=PODS_RANGE, services_secondary_range_name=SERVICES_RANGE
            ),
            datapath_provider="ADVANCED_DATAPATH",
            private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=True,
                # No public IP endpoint: outside the VPC the DNS endpoint below is the only way in.
                enable_private_endpoint=True,
                master_ipv4_cidr_block=cfg.network.master_cidr,
            ),
            control_plane_endpoints_config=gcp.container.ClusterControlPlaneEndpointsConfigArgs(
                # GitHub-hosted runners have no fixed address range; the DNS endpoint admits a request only with
                # a Google credential holding container.clusters.connect, wherever it comes from.
                dns_endpoint_config=gcp.container.ClusterControlPlaneEndpointsConfigDnsEndpointConfigArgs(
                    allow_external_traffic=True
                ),
            ),
            # The private IP endpoint stays for clients inside the VPC (or peered to it): only these ranges.
            master_authorized_networks_config=gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
                cidr_blocks=[
                    gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                        cidr_block=net.cidr, display_name=net.name
                    )
                    for net in cfg.network.master_authorized_networks
                ],
            ),
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=f"{cfg.project}.svc.id.goog"
            ),
            enable_shielded_nodes=True,
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=cfg.release_channel),
            # Automatic upgrades (control plane and node pools) only inside the stack's maintenance window.
            maintenance_policy=maintenance_policy(cfg),
            # Managed Service for Prometheus is the platform's one monitoring stack (components/monitoring.py).
            # Listing the components leaves GKE's managed DCGM package off: the project's exporter serves the
            # GPU alerts (ECC counters included), and two exporters would report every GPU twice.
            monitoring_config=gcp.container.ClusterMonitoringConfigArgs(
                enable_components=list(MONITORING_COMPONENTS),
                managed_prometheus=gcp.container.ClusterMonitoringConfigManagedPrometheusArgs(enabled=True),
            ),
            deletion_protection=cfg.deletion_protection,
            # Node pools are managed below; GKE insists on creating a default pool, which is then removed. Its
            # nodes still boot, so they run as the nodes' own account, shielded: the Compute default account may
            # be gone (constraints/iam.automaticIamGrantsForDefaultServiceAccounts), and under
            # constraints/compute.requireShieldedVm an unshielded default pool fails the cluster's creation.
            remove_default_node_pool=True,
            initial_node_count=1,
            node_config=gcp.container.ClusterNodeConfigArgs(
                service_account=self.node_service_account.email,
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                shielded_instance_config=gcp.container.ClusterNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True
                ),
                workload_metadata_config=gcp.container.ClusterNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
            ),
            resource_labels=contract.GCP_LABELS,
            # nodeConfig describes only the removed default pool and is replace-on-change: a cluster made before
            # it was set must not be replaced for it.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*(args.depends_on or []), self.nat],
                                        ignore_changes=["nodeConfig"]),
        )

        self.system_pool = self._node_pool("system", cfg.system_pool)
        self.gpu_pools = {pool.name: self._gpu_pool(pool) for pool in cfg.gpu_pools}

        self.workload_pool: pulumi.Output[str] = self.cluster.workload_identity_config.workload_pool
        self.dns_endpoint: pulumi.Output[str] = self.cluster.control_plane_endpoints_config.apply(
            lambda endpoints: dns_endpoint(endpoints, args.cluster_name)
        )
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(self.cluster.name, self.dns_endpoint).apply(
                lambda parts: render_kubeconfig(f"gke_{cfg.project}_{cfg.region}_{parts[0]}", parts[1])
            )
        )
        # Workloads wait for the pools: a Deployment applied before any node exists just sits Pending.
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.system_pool, *self.gpu_pools.values()]),
        )
        self.register_outputs({
            "cluster_name": self.cluster.name,
            "dns_endpoint": self.dns_endpoint,
            "workload_pool": self.workload_pool,
            "kubeconfig": self.kubeconfig,
            "gpu_pools": {key: pool.name for key, pool in self.gpu_pools.items()},
        })

    def _network(
        self, net: NetworkConfig, opts: pulumi.ResourceOptions
    ) -> tuple[gcp.compute.Network, gcp.compute.Subnetwork, gcp.compute.RouterNat]:
        cfg, name = self._cfg, self._name
        network = gcp.compute.Network(
            f"{name}-vpc", name="gpu-runtime", project=cfg.project, auto_create_subnetworks=False, opts=opts
        )
        subnet = gcp.compute.Subnetwork(
            f"{name}-subnet",
            name="gpu-runtime-nodes",
            project=cfg.project,
            region=cfg.region,
            network=network.id,
            ip_cidr_range=net.subnet_cidr,
            secondary_ip_ranges=[
                gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=PODS_RANGE, ip_cidr_range=net.pods_cidr),
                gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=SERVICES_RANGE, ip_cidr_range=net.services_cidr),
            ],
            # Google APIs (Pub/Sub, GCS, Artifact Registry) over Google's network, not the NAT.
            private_ip_google_access=True,
            opts=opts,
        )
        router = gcp.compute.Router(
            f"{name}-router", name="gpu-runtime-router", project=cfg.project, region=cfg.region,
            network=network.id, opts=opts,
        )
        # Private nodes have no external IP; NAT is their only way to registries outside Google (e.g. Helm charts).
        nat = gcp.compute.RouterNat(
            f"{name}-nat",
            name="gpu-runtime-nat",
            project=cfg.project,
            region=cfg.region,
            router=router.name,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
            log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
            opts=opts,
        )
        return network, subnet, nat

    def _node_service_account(self, opts: pulumi.ResourceOptions) -> pulumi.Output[Any]:
        """The nodes' account, made by the bootstrap (which gives the deploy identity actAs on it alone); its
        roles are granted here, with the rest of the cluster."""
        cfg, name = self._cfg, self._name
        account = gcp.serviceaccount.get_account_output(
            account_id=NODE_ACCOUNT_ID, project=cfg.project,
            opts=pulumi.InvokeOutputOptions(parent=self, depends_on=opts.depends_on))
        member = account.email.apply(lambda email: f"serviceAccount:{email}")
        for role in NODE_ROLES:
            gcp.projects.IAMMember(
                f"{name}-nodes-{role.removeprefix('roles/').replace('.', '-').lower()}",
                project=cfg.project, role=role, member=member, opts=opts,
            )
        return account

    def _node_config(
        self, machine_type: str, disk_size_gb: int, **extra: object
    ) -> gcp.container.NodePoolNodeConfigArgs:
        return gcp.container.NodePoolNodeConfigArgs(
            machine_type=machine_type,
            disk_size_gb=disk_size_gb,
            disk_type="pd-balanced",
            image_type="COS_CONTAINERD",
            service_account=self.node_service_account.email,
            oauth_scopes=[CLOUD_PLATFORM_SCOPE],
            workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
            shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                enable_secure_boot=True, enable_integrity_monitoring=True
            ),
            metadata={"disable-legacy-endpoints": "true"},
            **{"resource_labels": contract.GCP_LABELS, **extra},
        )

    def _node_pool(
        self,
        pool_name: str,
        pool: SystemPoolConfig | GpuPoolConfig,
        location_policy: str | None = None,
        pool_extra: dict[str, object] | None = None,
        auto_repair: bool = True,
        protect: bool | None = None,
        autoscaling: gcp.container.NodePoolAutoscalingArgs | None = None,
        **node_extra: object,
    ) -> gcp.container.NodePool:
        # No initial_node_count: it is replace-on-change and computed by GKE (the autoscaler owns the size from
        # minNodes up), so setting it could only ever replace the pool.
        return gcp.container.NodePool(
            f"{self._name}-{pool_name}",
            name=pool_name,
            project=self._cfg.project,
            cluster=self.cluster.name,
            location=self._cfg.region,
            node_locations=list(self._cfg.pool_zones(pool)),
            autoscaling=autoscaling or gcp.container.NodePoolAutoscalingArgs(
                min_node_count=pool.min_nodes, max_node_count=pool.max_nodes, location_policy=location_policy
            ),
            management=gcp.container.NodePoolManagementArgs(auto_repair=auto_repair, auto_upgrade=True),
            node_config=self._node_config(pool.machine_type, pool.disk_size_gb, **node_extra),
            opts=pulumi.ResourceOptions(parent=self, protect=protect),
            **(pool_extra or {}),
        )

    def _gpu_pool(self, pool: GpuPoolConfig) -> gcp.container.NodePool:
        gpu_label_key, gpu_label_value = contract.GPU_NODE_LABEL
        node_extra: dict[str, object] = {}
        pool_extra: dict[str, object] = {}
        if pool.reservation is not None:
            node_extra["reservation_affinity"] = reservation_affinity(pool.reservation)
        elif pool.queued_provisioning:
            # Queued nodes come from Dynamic Workload Scheduler capacity, never from a reservation.
            node_extra["reservation_affinity"] = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type=gpu_options.NO_RESERVATION
            )
        if pool.gpu_sharing is not None and pool.gpu_sharing.declared:
            declared_key, declared_value = contract.GPU_SHARING_DECLARED_LABEL
            node_extra["resource_labels"] = {**contract.GCP_LABELS, declared_key: declared_value}
        autoscaling = None
        if pool.queued_provisioning:
            pool_extra["queued_provisioning"] = gcp.container.NodePoolQueuedProvisioningArgs(enabled=True)
            # GKE's guide creates queued pools with --flex-start and total (not per-zone) node limits.
            node_extra["flex_start"] = True
            autoscaling = gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=0, total_max_node_count=pool.max_nodes, location_policy="ANY"
            )
        # Surge upgrades add nodes first, which a GPU pool may have no quota for: the stack says how many.
        pool_extra["upgrade_settings"] = gcp.container.NodePoolUpgradeSettingsArgs(
            strategy="SURGE", max_surge=pool.upgrade.max_surge, max_unavailable=pool.upgrade.max_unavailable
        )
        if pool.compact_placement:
            pool_extra["placement_policy"] = gcp.container.NodePoolPlacementPolicyArgs(type=gpu_options.COMPACT)
        return self._node_pool(
            gpu_options.node_pool_name(pool.name),
            pool,
            # Spot and scarce GPUs: take capacity in whichever zone has it rather than balancing zones.
            location_policy="ANY",
            pool_extra=pool_extra,
            # GKE refuses auto-repair on queued pools: their nodes live only as long as the request that got them.
            auto_repair=not pool.queued_provisioning,
            # A protected pool cannot be replaced or deleted by `pulumi up`: a replace-on-change edit stops the
            # deploy instead of taking the GPUs down (docs/runbooks/replace-gpu-pool.md). replaceGpuPools lifts it.
            protect=self._cfg.deletion_protection and pool.name not in self._cfg.replace_gpu_pools,
            autoscaling=autoscaling,
            # Image streaming: a scale-from-zero node starts the multi-GB worker image before it is pulled whole.
            gcfs_config=gcp.container.NodePoolNodeConfigGcfsConfigArgs(enabled=True),
            spot=pool.spot,
            guest_accelerators=[guest_accelerator(pool)],
            labels={gpu_label_key: gpu_label_value, POOL_LABEL: pool.name},
            # GKE adds this taint to GPU nodes itself; declaring it keeps Pulumi from seeing drift.
            taints=[gpu_taint()],
            **node_extra,
        )


def maintenance_policy(cfg: StackConfig) -> gcp.container.ClusterMaintenancePolicyArgs:
    """The cluster's recurring maintenance window, from the stack's ``maintenanceWindow``."""
    start, end, recurrence = cfg.maintenance_window.recurring_window()
    return gcp.container.ClusterMaintenancePolicyArgs(
        recurring_window=gcp.container.ClusterMaintenancePolicyRecurringWindowArgs(
            start_time=start, end_time=end, recurrence=recurrence
        )
    )


def guest_accelerator(pool: GpuPoolConfig) -> gcp.container.NodePoolNodeConfigGuestAcceleratorArgs:
    """The pool's GPUs with GKE-managed drivers, and its MIG partitions and sharing when configured."""
    sharing = pool.gpu_sharing
    return gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
        type=pool.accelerator_type,
        count=pool.accelerator_count,
        # Time-sharing and MIG need these GKE-managed drivers: GKE's device plugin does the splitting.
        gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
            gpu_driver_version=GPU_DRIVER_VERSION
        ),
        gpu_partition_size=pool.gpu_partition_size,
        gpu_sharing_config=(
            gcp.container.NodePoolNodeConfigGuestAcceleratorGpuSharingConfigArgs(
                gpu_sharing_strategy=sharing.strategy, max_shared_clients_per_gpu=sharing.max_shared_clients_per_gpu
            )
            if sharing is not None
            else None
        ),
    )


def dns_endpoint(endpoints: object, cluster_name: str) -> str:
    """The DNS endpoint GKE reports for the cluster (``controlPlaneEndpointsConfig.dnsEndpointConfig.endpoint``).

    Raises ``RuntimeError`` when GKE reports none: a kubeconfig without a server would fail far from the cause.
    """
    dns = getattr(endpoints, "dns_endpoint_config", None)
    endpoint = getattr(dns, "endpoint", None)
    if not endpoint:
        raise RuntimeError(f"cluster {cluster_name} reports no DNS control-plane endpoint "
                           "(controlPlaneEndpointsConfig.dnsEndpointConfig.endpoint)")
    return str(endpoint)


def reservation_affinity(reservation: ReservationConfig) -> gcp.container.NodePoolNodeConfigReservationAffinityArgs:
    """A pool's reservation affinity; a specific reservation is named by GKE's reservation-name key."""
    named = reservation.type == gpu_options.SPECIFIC_RESERVATION
    return gcp.container.NodePoolNodeConfigReservationAffinityArgs(
        consume_reservation_type=reservation.type,
        key=gpu_options.RESERVATION_NAME_KEY if named else None,
        values=[reservation.name] if named and reservation.name else None,
    )
