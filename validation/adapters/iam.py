"""IAM seams (the project's policy; bucket- and service-account-level policies) and their adapters."""

from __future__ import annotations

from typing import Any, Final, Protocol

# IAM policies of service accounts are read through the IAM REST API (no GAPIC client is needed for one call).
IAM_API: Final = "https://iam.googleapis.com/v1"
# One policy read answers in well under a second; a hung connection must not hold the checklist (seconds).
REQUEST_TIMEOUT_S: Final = 30.0
_SCOPE: Final = "https://www.googleapis.com/auth/cloud-platform"


class ProjectIam(Protocol):
    """The project's IAM policy and number."""

    def role_bindings(self) -> dict[str, set[str]]:
        """Role -> members of the project's IAM policy."""
        ...

    def project_number(self) -> str:
        """The numeric project id (the Pub/Sub service agent is named after it)."""
        ...


class ResourceIam(Protocol):
    """IAM policies of single resources: a bucket, a service account."""

    def bucket_bindings(self, bucket: str) -> dict[str, set[str]]:
        """Role -> members of ``bucket``'s IAM policy."""
        ...

    def service_account_bindings(self, email: str) -> dict[str, set[str]]:
        """Role -> members of the IAM policy of service account ``email`` (who may act as it)."""
        ...


class ResourceManagerIam:
    """``ProjectIam`` over ``google.cloud.resourcemanager_v3.ProjectsClient``."""

    def __init__(self, project: str, client: Any = None) -> None:
        if client is None:
            from google.cloud import resourcemanager_v3

            client = resourcemanager_v3.ProjectsClient()
        self._client = client
        self._resource = f"projects/{project}"

    def role_bindings(self) -> dict[str, set[str]]:
        """Role -> members of the project's IAM policy (conditional bindings included)."""
        policy = self._client.get_iam_policy(request={"resource": self._resource})
        bindings: dict[str, set[str]] = {}
        for binding in policy.bindings:
            bindings.setdefault(binding.role, set()).update(binding.members)
        return bindings

    def project_number(self) -> str:
        """The numeric project id, from ``projects/<number>``."""
        return self._client.get_project(name=self._resource).name.rsplit("/", 1)[-1]


def _by_role(bindings: Any) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for binding in bindings or []:
        found.setdefault(binding["role"], set()).update(binding.get("members") or [])
    return found


class GoogleResourceIam:
    """``ResourceIam`` over google-cloud-storage (buckets) and the IAM REST API (service accounts)."""

    def __init__(self, project: str, storage: Any = None, session: Any = None) -> None:
        self._project = project
        self._storage = storage
        self._session = session

    def bucket_bindings(self, bucket: str) -> dict[str, set[str]]:
        """Role -> members of ``bucket``'s policy (version 3, so conditional bindings are listed too)."""
        if self._storage is None:
            from google.cloud import storage

            self._storage = storage.Client(project=self._project)
        policy = self._storage.bucket(bucket).get_iam_policy(requested_policy_version=3)
        return _by_role(policy.bindings)

    def service_account_bindings(self, email: str) -> dict[str, set[str]]:
        """Role -> members of the service account's policy (``serviceAccounts.getIamPolicy``)."""
        if self._session is None:
            import google.auth
            from google.auth.transport.requests import AuthorizedSession

            credentials, _ = google.auth.default(scopes=[_SCOPE])
            self._session = AuthorizedSession(credentials)
        url = f"{IAM_API}/projects/{self._project}/serviceAccounts/{email}:getIamPolicy"
        response = self._session.post(url, json={"options": {"requestedPolicyVersion": 3}}, timeout=REQUEST_TIMEOUT_S)
        response.raise_for_status()
        return _by_role(response.json().get("bindings"))
