"""The gpu-scheduler's HTTP API (docs/scheduler.md#http-api): health, readiness, metrics open; the rest token-only."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Query, Request, Response, status
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field

from runtime.protocol import contract
from runtime.protocol.messages import SESSION_ID_MAX_LENGTH, is_job_id
from runtime.scheduler.auth import RequireToken, authorized
from runtime.scheduler.http_limits import LimitBody
from runtime.scheduler.maintenance import ModeStoreError
from runtime.scheduler.pools.base import MAX_POOL_WORKERS, PoolError, PoolInfo, PoolNotFound
from runtime.scheduler.service import JobView, Mode, Service
from runtime.scheduler.store import StoreError
from runtime.scheduler.thread_cpu import ThreadCpu, thread_cpu


class MaintenanceRequest(BaseModel):
    mode: Literal["drain", "normal"] = Field(description="drain: stop intake, in-flight jobs finish; normal: resume.")
    replica_only: bool = Field(False, description="Only this replica, until it restarts; by default every replica, "
                                                  "a restarted one included, follows the mode.")


class ScaleRequest(BaseModel):
    workers: int = Field(ge=0, le=MAX_POOL_WORKERS, description="Desired workers of the pool.")


class SessionView(BaseModel):
    session_id: str
    jobs: list[JobView] = Field(description="Every job started for the session, by job id.")


class CancelResponse(BaseModel):
    job_id: str
    cancel_requested: bool
    running_here: bool = Field(description="Whether this replica runs the job; others see the request within 2 s.")


def create_app(service: Service, on_shutdown: Callable[[], None] | None = None) -> FastAPI:
    """The FastAPI app over ``service``; ``on_shutdown`` runs when the server stops (before the process exits)."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        if on_shutdown is not None:
            # Runs in the server's shutdown, so it also runs when SIGTERM ends the process.
            await asyncio.to_thread(on_shutdown)

    app = FastAPI(title="gpu-scheduler", version="1", lifespan=lifespan,
                  description="Consumes GPU job requests from Pub/Sub, runs them on Dask or Vertex AI, publishes "
                              "results. Every endpoint but health, readiness, metrics and this description needs "
                              f"`Authorization: Bearer <{contract.SchedulerEnv.CONTROL_TOKEN}>`.")
    # The last added runs first: the token is checked from the headers before the body limit reads anything.
    app.add_middleware(LimitBody)
    app.add_middleware(RequireToken, token=service.settings.control_token)

    @app.exception_handler(StoreError)
    def store_unavailable(_: Request, exc: StoreError) -> JSONResponse:
        return JSONResponse({"detail": f"the result store is unavailable: {exc}"},
                            status_code=status.HTTP_503_SERVICE_UNAVAILABLE)

    # On the API too: on-call tools and `gpurt local status` ask the API's address; the kubelet asks the probes'.
    _add_probes(app, service)

    @app.get(contract.METRICS_PATH, summary="Prometheus metrics (gpu_runtime_*).")
    def metrics() -> Response:
        return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/status", summary="Mode, slots, in-flight jobs, backend and leader of this replica.")
    def status_() -> dict[str, Any]:
        return service.status()

    @app.get("/status/leader", summary="Who holds the leader lease.")
    def leader() -> dict[str, Any]:
        return service.leader_status()

    @app.get("/status/threads", response_model=list[ThreadCpu],
             summary="CPU seconds of each thread of this replica, busiest first (Linux; empty elsewhere).")
    def threads() -> list[ThreadCpu]:
        return thread_cpu()

    @app.get("/jobs", response_model=SessionView,
             summary="The jobs of a session (the requests' session_id): running, finished with their results, "
                     "or unfinished.")
    def session_jobs(session_id: str = Query(min_length=1, max_length=SESSION_ID_MAX_LENGTH)) -> SessionView:
        return SessionView(session_id=session_id, jobs=service.session(session_id))

    @app.get("/jobs/{job_id}", response_model=JobView, summary="A running job or its stored result.")
    def get_job(job_id: str) -> JobView:
        if not is_job_id(job_id):
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"{job_id!r} is not a valid job id")
        view = service.job(job_id)
        if view is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no running job and no result for {job_id!r}")
        return view

    @app.delete("/jobs/{job_id}", response_model=CancelResponse, status_code=status.HTTP_202_ACCEPTED,
                summary="Cancel a job: a running one stops cooperatively, a queued one never starts; "
                        "its result is `cancelled`.")
    def cancel_job(job_id: str) -> CancelResponse:
        if not is_job_id(job_id):
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, f"{job_id!r} is not a valid job id")
        view = service.job(job_id)
        if view is not None and view.result is not None:
            raise HTTPException(status.HTTP_409_CONFLICT, f"job {job_id!r} already finished: {view.state}")
        return CancelResponse(job_id=job_id, cancel_requested=True, running_here=service.cancel(job_id))

    @app.get("/pools", response_model=list[PoolInfo], summary="Worker pools and their sizes.")
    def list_pools() -> list[PoolInfo]:
        return _pools(service).list()

    @app.post("/pools/stop-all", response_model=list[PoolInfo],
              summary="Evict every pool (its workers retire; their jobs move or are retried).")
    def stop_all() -> list[PoolInfo]:
        _pools(service)
        return _pool_call(service.stop_all_pools)

    @app.post("/pools/{pool_id}/stop", response_model=PoolInfo, summary="Evict one pool.")
    def stop_pool(pool_id: str) -> PoolInfo:
        _pools(service)
        return _pool_call(lambda: service.stop_pool(pool_id))

    @app.post("/pools/{pool_id}/scale", response_model=PoolInfo, summary="Resize a pool.")
    def scale_pool(pool_id: str, body: ScaleRequest) -> PoolInfo:
        _pools(service)
        return _pool_call(lambda: service.scale_pool(pool_id, body.workers))

    @app.post("/control/maintenance",
              summary="drain: stop pulling without nacking, in-flight jobs finish; normal: resume intake.")
    def maintenance(body: MaintenanceRequest) -> dict[str, Any]:
        try:
            service.set_mode(Mode(body.mode), replica_only=body.replica_only)
        except ModeStoreError as exc:  # the shared record cannot be written: say so instead of half a drain
            raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                                f"could not write the maintenance mode every replica follows: {exc}") from None
        return {"mode": service.mode.value, "replica_drained": body.replica_only and body.mode == "drain",
                "in_flight": service.registry.count()}

    return app


def create_probe_app(service: Service) -> FastAPI:
    """The kubelet's probes alone, for their own listener (``GPURT_PROBE_PORT``): open, nothing else served."""
    app = FastAPI(title="gpu-scheduler probes", version="1", openapi_url=None, docs_url=None, redoc_url=None)
    _add_probes(app, service)
    return app


def _add_probes(app: FastAPI, service: Service) -> None:
    @app.get(contract.HEALTH_PATH, summary="Liveness: the process serves requests.")
    def healthz() -> dict[str, str]:
        return dict(contract.HEALTH_BODY)

    token = service.settings.control_token.encode() if service.settings.control_token else None

    @app.get(contract.READY_PATH, summary="Readiness: consuming (unless drained), the backend reachable and the "
                                          "result store working (503 while a store outage stops intake); the "
                                          "reasons only with the control token.")
    def readyz(request: Request) -> JSONResponse:
        reasons = service.readiness()
        code = status.HTTP_200_OK if not reasons else status.HTTP_503_SERVICE_UNAVAILABLE
        # The status is open (the kubelet sends no token); the reasons name the result store's path and job ids
        # (issue 43), which are the token holder's to read, as /status is.
        body: dict[str, Any] = {"ready": not reasons}
        if authorized(request.scope, token):
            body["reasons"] = reasons
        return JSONResponse(body, status_code=code)


def _pools(service: Service) -> Any:
    if service.pools is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "pools are not available yet")
    return service.pools


def _pool_call(action: Any) -> Any:
    try:
        return action()
    except PoolNotFound as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None
    except PoolError as exc:
        raise HTTPException(status.HTTP_502_BAD_GATEWAY, str(exc)) from None
