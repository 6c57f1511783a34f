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
}

_PROJECT_READ: Final = ("resourcemanager.projects.get", "resourcemanager.projects.list")

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
    "roles/iam.workloadIdentityUser": frozenset({
        "iam.serviceAccounts.get", "iam.serviceAccounts.getAccessToken", "iam.serviceAccounts.getOpenIdToken",
        "iam.serviceAccounts.list",
    }),
}


def source_of(role: str) -> str:
    """The reference page that lists ``role``'s permissions."""
    return SOURCES[role.removeprefix("roles/").split(".", 1)[0]]
