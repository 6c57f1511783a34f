"""Typed client of the gpu-scheduler HTTP API (docs/scheduler.md#http-api).

Used by the CLI, the demo, the benchmark and the validation helper. Every call carries the bearer token:
the scheduler asks for it on everything but health, readiness and metrics (job results are confidential);
every failure surfaces as ``ApiError`` with the server's own explanation, never a raw traceback.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runtime.protocol.contract import HEALTH_PATH, READY_PATH
from runtime.protocol.messages import JobResult

M = TypeVar("M", bound=BaseModel)

# Control calls are quick; a scheduler that needs longer than this is unhealthy and the user should know.
DEFAULT_TIMEOUT_S: Final = 10.0


class ApiError(RuntimeError):
    """A call to the scheduler API failed; ``status`` is the HTTP status (None when unreachable)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Pool(BaseModel):
    """One worker pool as ``GET /pools`` reports it."""

    model_config = ConfigDict(extra="allow")

    id: str
    workers: int = 0
    desired: int | None = None
    gpus_per_worker: int = 0
    status: str | None = None  # running, scaling or stopped


class JobState(BaseModel):
    """What ``GET /jobs/{id}`` knows: the terminal result, or where a running job stands."""

    model_config = ConfigDict(extra="allow")

    job_id: str
    state: str | None = Field(None, description="running, or the terminal status of the stored result.")
    attempt: int | None = None
    cancel_requested: bool = False
    result: JobResult | None = None


class ApiClient:
    """Synchronous client of one scheduler; use as a context manager or call ``close()``."""

    def __init__(self, base_url: str, token: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 transport: httpx.BaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout_s, transport=transport)
        self.base_url = base_url

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection pool."""
        self._http.close()

    # --- health ------------------------------------------------------------------------------------

    def healthz(self) -> dict[str, Any]:
        """``GET /healthz``; raises ``ApiError`` when the scheduler is down or unhealthy."""
        return self._call("GET", HEALTH_PATH)

    def is_ready(self) -> bool:
        """Whether ``GET /readyz`` answers 2xx (False when unreachable)."""
        try:
            return self._http.get(READY_PATH).is_success
        except httpx.HTTPError:
            return False

    def status(self) -> dict[str, Any]:
        """``GET /status``: consumer, maintenance mode, in-flight jobs, backlog."""
        return self._call("GET", "/status")

    def leader(self) -> dict[str, Any]:
        """``GET /status/leader``."""
        return self._call("GET", "/status/leader")

    def threads(self) -> list[dict[str, Any]]:
        """``GET /status/threads``: CPU seconds of each of the replica's threads, busiest first."""
        return list(self._call("GET", "/status/threads"))

    # --- jobs --------------------------------------------------------------------------------------

    def get_job(self, job_id: str) -> JobState:
        """``GET /jobs/{id}``: the job's state and, once finished, its result."""
        return _model(JobState, self._call("GET", f"/jobs/{job_id}"))

    def session_jobs(self, session_id: str) -> list[JobState]:
        """``GET /jobs?session_id=``: every job started for the session, with the results of those finished."""
        body = self._call("GET", "/jobs", params={"session_id": session_id})
        items = body.get("jobs") if isinstance(body, dict) else None
        if not isinstance(items, list):
            raise ApiError(f"unexpected answer from the scheduler: no job list for session {session_id!r}")
        return [_model(JobState, item) for item in items]

    def cancel_job(self, job_id: str) -> dict[str, Any]:
        """``DELETE /jobs/{id}``: ask a running job to stop."""
        return self._call("DELETE", f"/jobs/{job_id}")

    # --- pools and maintenance ---------------------------------------------------------------------

    def pools(self) -> list[Pool]:
        """``GET /pools``."""
        body = self._call("GET", "/pools")
        items = body.get("pools", []) if isinstance(body, dict) else body
        return [_model(Pool, item) for item in items]

    def scale_pool(self, pool_id: str, workers: int) -> dict[str, Any]:
        """``POST /pools/{id}/scale``."""
        return self._call("POST", f"/pools/{pool_id}/scale", json={"workers": workers})

    def stop_pool(self, pool_id: str) -> dict[str, Any]:
        """``POST /pools/{id}/stop``: evict the pool's workers."""
        return self._call("POST", f"/pools/{pool_id}/stop")

    def stop_all_pools(self) -> dict[str, Any]:
        """``POST /pools/stop-all``."""
        return self._call("POST", "/pools/stop-all")

    def set_maintenance(self, mode: Literal["drain", "normal"], *, replica_only: bool = False) -> dict[str, Any]:
        """``POST /control/maintenance``: ``drain`` stops intake, ``normal`` resumes it, on every replica (a restarted
        one too); ``replica_only`` on the replica answering alone, until it restarts."""
        body: dict[str, Any] = {"mode": mode, "replica_only": True} if replica_only else {"mode": mode}
        return self._call("POST", "/control/maintenance", json=body)

    # --- plumbing ----------------------------------------------------------------------------------

    def _call(self, method: str, path: str, json: Any = None, params: dict[str, str] | None = None) -> Any:
        try:
            response = self._http.request(method, path, json=json, params=params)
        except httpx.HTTPError as exc:
            raise ApiError(f"cannot reach the scheduler at {self.base_url}: {exc}") from None
        if response.is_success:
            return response.json() if response.content else {}
        raise ApiError(f"{method} {path} → {response.status_code}: {_reason(response)}", response.status_code)


def _reason(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip() or response.reason_phrase
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])
    return str(body)


def _model(model: type[M], body: Any) -> M:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise ApiError(f"unexpected answer from the scheduler: {exc}") from None
