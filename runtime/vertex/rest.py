"""Vertex AI custom jobs over REST (``https://{region}-aiplatform.googleapis.com/v1``).

The scheduler needs four calls of one service; the REST surface with Application Default Credentials
(Workload Identity in the cluster) serves them without google-cloud-aiplatform, whose SDK stack
(BigQuery, Cloud Storage, the GenAI client) would otherwise ride along in the scheduler image.
Bodies are the service's JSON: camelCase fields, ``state`` as the ``JobState`` enum name.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

# The states after which a custom job never changes again (``JobState`` in the v1 API).
TERMINAL_STATES: Final = frozenset({"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED",
                                    "JOB_STATE_EXPIRED", "JOB_STATE_PARTIALLY_SUCCEEDED"})
# One call of this API answers in well under a second; a hung connection must not hold a job's thread.
REQUEST_TIMEOUT_S: Final = 30.0
_SCOPE: Final = "https://www.googleapis.com/auth/cloud-platform"


class VertexApiError(RuntimeError):
    """The Vertex AI API answered with an error status (its code and message are in the text)."""


class CustomJobs(Protocol):
    """The custom-job calls GPU Runtime makes; resources are the service's JSON as dicts."""

    def create(self, parent: str, custom_job: dict[str, Any]) -> dict[str, Any]:
        """Create ``custom_job`` under ``parent`` (``projects/P/locations/R``); the created resource."""
        ...

    def get(self, name: str) -> dict[str, Any]:
        """The custom job ``name`` (``projects/P/locations/R/customJobs/N``)."""
        ...

    def cancel(self, name: str) -> None:
        """Ask the service to cancel ``name``; it ends ``JOB_STATE_CANCELLED``."""
        ...

    def list(self, parent: str, *, filter: str, page_size: int) -> list[dict[str, Any]]:
        """The first page (at most ``page_size``) of custom jobs under ``parent`` matching ``filter``."""
        ...


class RestCustomJobs:
    """``CustomJobs`` over an authorized HTTP session (``google.auth.transport.requests.AuthorizedSession``)."""

    def __init__(self, region: str, session: Any = None, timeout_s: float = REQUEST_TIMEOUT_S,
                 endpoint: str = "", token: str | None = None) -> None:
        """``endpoint`` replaces the regional Google endpoint (the local stand-in, ``runtime.local.vertex_api``),
        which takes the platform's ``token`` as its bearer token where Google takes an OAuth token: a plain
        session with that header then."""
        if session is None and endpoint:
            import requests

            session = requests.Session()
            if token:
                session.headers["Authorization"] = f"Bearer {token}"
        elif session is None:
            import google.auth
            from google.auth.transport.requests import AuthorizedSession

            credentials, _ = google.auth.default(scopes=[_SCOPE])
            session = AuthorizedSession(credentials)
        self._session = session
        self._base = f"{endpoint.rstrip('/')}/v1/" if endpoint else f"https://{region}-aiplatform.googleapis.com/v1/"
        self._timeout = timeout_s

    def create(self, parent: str, custom_job: dict[str, Any]) -> dict[str, Any]:
        """POST ``{parent}/customJobs``."""
        return self._call("POST", f"{parent}/customJobs", json=custom_job)

    def get(self, name: str) -> dict[str, Any]:
        """GET ``{name}``."""
        return self._call("GET", name)

    def cancel(self, name: str) -> None:
        """POST ``{name}:cancel``."""
        self._call("POST", f"{name}:cancel", json={})

    def list(self, parent: str, *, filter: str, page_size: int) -> list[dict[str, Any]]:
        """GET ``{parent}/customJobs`` with ``filter`` and ``pageSize`` (one page)."""
        body = self._call("GET", f"{parent}/customJobs", params={"filter": filter, "pageSize": page_size})
        return list(body.get("customJobs", []))

    def close(self) -> None:
        """Close the session's connections."""
        self._session.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self._session.request(method, self._base + path, timeout=self._timeout, **kwargs)
        if response.status_code >= 400:
            try:
                error = response.json().get("error", {})
                detail = f"{error.get('status', response.status_code)}: {error.get('message', '')}"
            except ValueError:
                detail = f"HTTP {response.status_code}: {response.text[:200]}"
            raise VertexApiError(f"Vertex AI {method} {path} failed with {detail}")
        return response.json() if response.content else {}
