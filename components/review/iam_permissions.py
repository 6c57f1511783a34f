"""What the predefined GCP roles this platform grants contain: the permission lists the IAM proof relies on.

Transcribed from Google's IAM roles and permissions reference (one page per service, ``SOURCES``) on
``RETRIEVED``. For small roles the whole list is here; for the large ones (``roles/aiplatform.user``,
``roles/monitoring.viewer``, ``roles/artifactregistry.reader``) only their permissions in the API families
this platform calls — enough to prove a call is allowed, and a role missing here fails the proof rather
than passing it. Update the table (and ``RETRIEVED``) when a role is added or Google changes one.
"""

from __future__ import annotations

from typing import Final

RETRIEVED: Final = "2026-11-23"
REFERENCE: Final = "https://cloud.google.com/iam/docs/roles-permissions"
# The reference page each role family is listed on.
SOURCES: Final = {
    "pubsub": f"{REFERENCE}/pubsub",
    "storage": f"{REFERENCE}/storage",
    "monitoring": f"{REFERENCE}/monitoring",
    "aiplatform": f"{REFERENCE}/aiplatform",
    "logging": f"{REFERENCE}/logging",
    "artifactregistry": f"{REFERENCE}/artifactregistry",
    "iam": f"{REFERENCE}/iam",
    "serviceusage": f"{REFERENCE}/serviceusage",
    "compute": f"{REFERENCE}/compute",
    "container": f"{REFERENCE}/container",
    "resourcemanager": f"{REFERENCE}/resourcemanager",
    "cloudquotas": f"{REFERENCE}/cloudquotas",
}

_PROJECT_READ: Final = ("resourcemanager.projects.get", "resourcemanager.projects.list")

# The permissions of the Kubernetes objects a stack declares, as GKE's IAM names them (container.<plural>.<verb>):
# roles/container.admin holds ``container.*``; the table lists the families the deploy proof asks about.
_K8S_PLURALS: Final = (
    "namespaces", "serviceAccounts", "configMaps", "services", "secrets", "deployments", "daemonSets",
    "podDisruptionBudgets", "networkPolicies", "roles", "roleBindings", "clusterRoles", "clusterRoleBindings",
    "customResourceDefinitions", "thirdPartyObjects",
)

ROLE_PERMISSIONS: Final[dict[str, frozenset[str]]] = {
    "roles/pubsub.publisher": frozenset({"pubsub.topics.publish"}),
    "roles/pubsub.subscriber": frozenset({
        "pubsub.snapshots.seek", "pubsub.subscriptions.consume", "pubsub.topics.attachSubscription",
    }),
    "roles/logging.logWriter": frozenset({"logging.logEntries.create", "logging.logEntries.route"}),
    "roles/storage.objectAdmin": frozenset({
        "orgpolicy.policy.get", *_PROJECT_READ,
        "storage.managedFolders.create", "storage.managedFolders.delete", "storage.managedFolders.get",
        "storage.managedFolders.getIamPolicy", "storage.managedFolders.list", "storage.managedFolders.setIamPolicy",
        "storage.multipartUploads.abort", "storage.multipartUploads.create", "storage.multipartUploads.list",
        "storage.multipartUploads.listParts",
        "storage.objects.create", "storage.objects.delete", "storage.objects.get", "storage.objects.getIamPolicy",
        "storage.objects.list", "storage.objects.overrideUnlockedRetention", "storage.objects.restore",
        "storage.objects.setIamPolicy", "storage.objects.setRetention", "storage.objects.update",
    }),
    # objectAdmin without the IAM-policy and retention permissions: read, write, replace, delete objects.
    "roles/storage.objectUser": frozenset({
        "orgpolicy.policy.get", *_PROJECT_READ,
        "storage.managedFolders.create", "storage.managedFolders.delete", "storage.managedFolders.get",
        "storage.managedFolders.list",
        "storage.multipartUploads.abort", "storage.multipartUploads.create", "storage.multipartUploads.list",
        "storage.multipartUploads.listParts",
        "storage.objects.create", "storage.objects.delete", "storage.objects.get", "storage.objects.list",
        "storage.objects.restore", "storage.objects.update",
    }),
    # Excerpt: the Cloud Monitoring read permissions (the role also reads Cloud Trace, alerting, uptime checks...).
    "roles/monitoring.viewer": frozenset({
        *_PROJECT_READ,
        "monitoring.metricDescriptors.get", "monitoring.metricDescriptors.list",
        "monitoring.monitoredResourceDescriptors.get", "monitoring.monitoredResourceDescriptors.list",
        "monitoring.timeSeries.list",
    }),
    # Excerpt: custom jobs (the role covers every Vertex AI resource a user works with).
    "roles/aiplatform.user": frozenset({
        *_PROJECT_READ,
        "aiplatform.customJobs.cancel", "aiplatform.customJobs.create", "aiplatform.customJobs.delete",
        "aiplatform.customJobs.get", "aiplatform.customJobs.list",
    }),
    # Excerpt: Docker images and repositories.
    "roles/artifactregistry.reader": frozenset({
        "artifactregistry.dockerimages.get", "artifactregistry.dockerimages.list",
        "artifactregistry.repositories.downloadArtifacts", "artifactregistry.repositories.get",
        "artifactregistry.repositories.list", "artifactregistry.tags.get", "artifactregistry.tags.list",
        "artifactregistry.versions.get", "artifactregistry.versions.list",
    }),
    "roles/iam.serviceAccountUser": frozenset({
        "iam.serviceAccounts.actAs", "iam.serviceAccounts.get", "iam.serviceAccounts.list", *_PROJECT_READ,
    }),
    # --- the CI identities' roles (components/review/ci_proof.py); excerpts in the families their calls use. ---
    # Excerpt: enabling the stack's APIs and asking for a service agent.
    "roles/serviceusage.serviceUsageAdmin": frozenset({
        "serviceusage.services.disable", "serviceusage.services.enable", "serviceusage.services.get",
        "serviceusage.services.list", "serviceusage.services.use",
    }),
    # Excerpt: topics, subscriptions and their IAM policies.
    "roles/pubsub.admin": frozenset({
        *(f"pubsub.topics.{verb}" for verb in ("attachSubscription", "create", "delete", "get", "getIamPolicy", "list",
                                               "publish", "setIamPolicy", "update")),
        *(f"pubsub.subscriptions.{verb}" for verb in ("consume", "create", "delete", "get", "getIamPolicy", "list",
                                                      "setIamPolicy", "update")),
    }),
    # Excerpt: buckets, their IAM policies, and objects.
    "roles/storage.admin": frozenset({
        *(f"storage.buckets.{verb}" for verb in ("create", "delete", "get", "getIamPolicy", "list", "setIamPolicy",
                                                 "update")),
        *(f"storage.objects.{verb}" for verb in ("create", "delete", "get", "list", "update")),
    }),
    # Excerpt: networks, subnetworks, routers (a NAT is part of its router), regions and the project (its
    # global quotas).
    "roles/compute.networkAdmin": frozenset({
        *(f"compute.{kind}.{verb}" for kind in ("networks", "subnetworks", "routers")
          for verb in ("create", "delete", "get", "list", "update")),
        "compute.networks.updatePolicy", "compute.subnetworks.use", "compute.regions.get", "compute.regions.list",
        "compute.projects.get",
    }),
    # Excerpt of ``container.*``: clusters, node pools, the control plane's DNS endpoint, Kubernetes objects.
    "roles/container.admin": frozenset({
        *(f"container.clusters.{verb}" for verb in ("connect", "create", "delete", "get", "list", "update")),
        "container.operations.get",
        *(f"container.{plural}.{verb}" for plural in _K8S_PLURALS
          for verb in ("create", "delete", "get", "list", "update")),
        "container.roles.escalate", "container.roles.bind", "container.clusterRoles.escalate",
        "container.clusterRoles.bind", "container.pods.list", "container.pods.portForward",
        "container.replicaSets.list", "container.leases.get",
    }),
    # Reads the cluster and connects to its endpoints; no Kubernetes object (RBAC decides inside).
    "roles/container.clusterViewer": frozenset({
        "container.clusters.connect", "container.clusters.get", "container.clusters.list",
    }),
    # Excerpt: service accounts and their IAM policies.
    "roles/iam.serviceAccountAdmin": frozenset({
        *(f"iam.serviceAccounts.{verb}" for verb in ("create", "delete", "get", "getIamPolicy", "list",
                                                     "setIamPolicy", "update")),
        *_PROJECT_READ,
    }),
    "roles/iam.serviceAccountViewer": frozenset({
        "iam.serviceAccountKeys.get", "iam.serviceAccountKeys.list", "iam.serviceAccounts.get",
        "iam.serviceAccounts.getIamPolicy", "iam.serviceAccounts.list", *_PROJECT_READ,
    }),
    "roles/resourcemanager.projectIamAdmin": frozenset({
        "iam.policybindings.get", "iam.policybindings.list", "resourcemanager.projects.get",
        "resourcemanager.projects.getIamPolicy", "resourcemanager.projects.setIamPolicy",
    }),
    # Excerpt: custom jobs (gpurt validate lists them).
    "roles/aiplatform.viewer": frozenset({*_PROJECT_READ, "aiplatform.customJobs.get", "aiplatform.customJobs.list"}),
    "roles/cloudquotas.viewer": frozenset({
        "cloudquotas.quotas.get", "cloudquotas.quotas.list", *_PROJECT_READ,
    }),
    # The reader's permissions, and pushing images.
    "roles/artifactregistry.writer": frozenset({
        "artifactregistry.dockerimages.get", "artifactregistry.dockerimages.list",
        "artifactregistry.repositories.downloadArtifacts", "artifactregistry.repositories.get",
        "artifactregistry.repositories.list", "artifactregistry.tags.get", "artifactregistry.tags.list",
        "artifactregistry.versions.get", "artifactregistry.versions.list",
        "artifactregistry.repositories.uploadArtifacts", "artifactregistry.tags.create", "artifactregistry.tags.update",
    }),
    "roles/iam.workloadIdentityUser": frozenset({
        "iam.serviceAccounts.get", "iam.serviceAccounts.getAccessToken", "iam.serviceAccounts.getOpenIdToken",
        "iam.serviceAccounts.list",
    }),
}


def source_of(role: str) -> str:
    """The reference page that lists ``role``'s permissions."""
    return SOURCES[role.removeprefix("roles/").split(".", 1)[0]]
