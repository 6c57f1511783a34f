"""Project IAM seam and its adapter over google-cloud-resource-manager."""

from __future__ import annotations

from typing import Any, Protocol


class ProjectIam(Protocol):
    """The project's IAM policy and number."""

    def role_bindings(self) -> dict[str, set[str]]:
        """Role -> members of the project's IAM policy."""
        ...

    def project_number(self) -> str:
        """The numeric project id (the Pub/Sub service agent is named after it)."""
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
