"""Run jobs as Vertex AI custom jobs named ``gpu-runtime-<job_id>``.

The custom job runs the worker image's ``vertex_task`` entry point on one GPU machine and writes its
output under the result store (``vertex/<job_id>/<attempt>/``); this backend writes the job's params there
first (``params.json``: by reference, since one argument is capped at 128 KiB and arguments show in ``ps``),
creates the job, polls it to a terminal state, reads the output back and removes the params. The
``CustomJobs`` client is passed in: tests give it a recording stand-in that answers with the service's JSON.
"""

from __future__ import annotations

import logging
import posixpath
import re
import threading
import time
from collections.abc import Callable
from typing import Any, Final

import fsspec

from kernels.errors import JobCancelled, TransientJobError
from runtime.protocol import contract
from runtime.protocol.messages import JobRequest
from runtime.scheduler.backends.base import Execution, Placed
from runtime.storage.filesystems import url_to_fs
from runtime.vertex.rest import TERMINAL_STATES, CustomJobs, RestCustomJobs
from runtime.worker.vertex_task import (
    ARTIFACTS_FOLDER,
    ENTRY_POINT,
    ERROR_FILE,
    OUTPUT_FILE,
    PARAMS_FILE,
    VertexFailure,
    VertexOutput,
    task_args,
)

# Vertex jobs take minutes to provision: polling faster only spends API quota.
POLL_INTERVAL_S: Final = 15.0
# A custom job's own timeout counts running time only; a GPU machine may take this long to provision
# before that. Past timeout + allowance the job is cancelled and the delivery counts as transient.
PROVISION_ALLOWANCE_S: Final = 1800.0
_LABEL_VALUE: Final = re.compile(r"[^a-z0-9_-]")
# The folder of the result store under which each custom job has its own (``<job_id>/<attempt>``).
VERTEX_FOLDER: Final = "vertex"

log = logging.getLogger(__name__)


class VertexBackend:
    """Creates, polls and cancels custom jobs through ``client``."""

    name = "vertex"

    def __init__(self, client: CustomJobs, *, project: str, region: str, image: str, machine_type: str,
                 accelerator: str, output_root: str, accelerator_count: int = 1, service_account: str | None = None,
                 poll_interval_s: float = POLL_INTERVAL_S, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not image:
            raise ValueError("the Vertex AI backend needs GPURT_VERTEX_IMAGE (the Dask GPU worker image)")
        self._client = client
        self._parent = f"projects/{project}/locations/{region}"
        self._image = image
        self._machine_type = machine_type
        self._accelerator = accelerator
        self._accelerator_count = accelerator_count
        self._output_root = output_root.rstrip("/")
        self._service_account = service_account
        self._poll = poll_interval_s
        self._sleep = sleep
        self._clock = clock
        self._lock = threading.Lock()
        self._running: dict[str, str] = {}

    @classmethod
    def from_settings(cls, settings: Any, store: Any) -> VertexBackend:
        """Build from the service settings, with the regional REST client."""
        # The local stand-in takes the platform's control token where Google takes an OAuth token.
        client = RestCustomJobs(settings.vertex_region, endpoint=settings.vertex_endpoint,
                                token=settings.control_token)
        return cls(client, project=settings.project, region=settings.vertex_region, image=settings.vertex_image,
                   machine_type=settings.vertex_machine_type, accelerator=settings.vertex_accelerator,
                   accelerator_count=settings.vertex_accelerator_count,
                   output_root=f"{store.url}/{VERTEX_FOLDER}", service_account=settings.vertex_service_account,
                   poll_interval_s=settings.vertex_poll_s)

    def custom_job(self, request: JobRequest, attempt: int) -> dict[str, Any]:
        """The CustomJob resource (REST JSON) for one delivery of ``request`` (pure; what ``run`` submits)."""
        output = self._output_url(request.job_id, attempt)
        spec: dict[str, Any] = {
            "workerPoolSpecs": [{
                "replicaCount": "1",  # int64 fields are strings in the JSON mapping
                "machineSpec": {"machineType": self._machine_type, "acceleratorType": self._accelerator,
                                "acceleratorCount": self._accelerator_count},
                "containerSpec": {
                    "imageUri": self._image,
                    "command": list(ENTRY_POINT),
                    "args": task_args(request.type.value, output),
                },
            }],
            "scheduling": {"timeout": f"{int(request.timeout_s)}s"},
        }
        if self._service_account:
            spec["serviceAccount"] = self._service_account
        labels = {**contract.GCP_LABELS, "job-id": _LABEL_VALUE.sub("-", request.job_id.lower())[:63]}
        return {"displayName": f"{contract.VERTEX_JOB_PREFIX}{request.job_id}", "jobSpec": spec, "labels": labels}

    def run(self, request: JobRequest, *, attempt: int, cancelled: Callable[[], bool] | None = None) -> Execution:
        """Create the custom job and wait for it (its own ``scheduling.timeout`` ends it at ``timeout_s``).

        ``cancelled``: whether a cancel came while the job was being created, before ``cancel`` could find it
        (the caller sets its flag, then calls ``cancel``; this registers the job, then reads the flag).
        The params go to the job's folder first and are removed once the job has ended, however it ended.
        """
        params = f"{self._output_url(request.job_id, attempt)}/{PARAMS_FILE}"
        _put_params(params, request.params.model_dump_json().encode() if request.params is not None else b"{}")
        try:
            return self._run(request, attempt, cancelled)
        finally:
            _remove_params(params)

    def _run(self, request: JobRequest, attempt: int, cancelled: Callable[[], bool] | None) -> Execution:
        created = self._client.create(self._parent, self.custom_job(request, attempt))
        name = created["name"]
        with self._lock:
            self._running[request.job_id] = name
        if cancelled is not None and cancelled():
            self._client.cancel(name)
        give_up_at = self._clock() + request.timeout_s + PROVISION_ALLOWANCE_S
        try:
            job = created
            while job.get("state") not in TERMINAL_STATES:
                if self._clock() > give_up_at:
                    self._client.cancel(name)
                    raise TransientJobError(f"Vertex AI job {name} did not finish within "
                                            f"{request.timeout_s + PROVISION_ALLOWANCE_S:g} s; cancelled it")
                self._sleep(self._poll)
                job = self._client.get(name)
        finally:
            with self._lock:
                self._running.pop(request.job_id, None)
        output = self._output_url(request.job_id, attempt)
        if job["state"] == "JOB_STATE_SUCCEEDED":
            return self._read_output(output)
        if job["state"] == "JOB_STATE_CANCELLED":
            raise JobCancelled(f"Vertex AI job {name} was cancelled")
        message = job.get("error", {}).get("message") or "no message"
        self._raise_failure(output, f"Vertex AI job {name} ended {job['state']}: {message}")
        raise AssertionError("unreachable")  # _raise_failure always raises

    def cancel(self, job_id: str) -> bool:
        """Cancel the custom job of ``job_id``; ``run`` then reports ``JobCancelled``."""
        with self._lock:
            name = self._running.get(job_id)
        if name is None:
            return False
        self._client.cancel(name)
        return True

    def gpu_slots(self) -> int:
        """Unknown here: Vertex AI capacity is a quota, not a worker count."""
        return 0

    def ready(self) -> bool:
        """Vertex AI is a managed API; readiness is not probed per request."""
        return True

    def close(self) -> None:
        """Close the client's connections."""
        close = getattr(self._client, "close", None)
        if close is not None:
            close()

    def _output_url(self, job_id: str, attempt: int) -> str:
        return f"{self._output_root}/{job_id}/{attempt}"

    def _read_output(self, output: str) -> Execution:
        with fsspec.open(f"{output}/{OUTPUT_FILE}", "rb") as handle:
            body = VertexOutput.model_validate_json(handle.read())
        artifacts = {}
        for name in body.artifacts:
            with fsspec.open(f"{output}/{ARTIFACTS_FOLDER}/{name}", "rb") as handle:
                artifacts[name] = handle.read()
        return Placed(summary=body.summary, artifacts=artifacts, device=body.device, elapsed_s=body.elapsed_s,
                      paths=body.paths, kernel_s=body.kernel_s, load_s=body.load_s, backend=self.name)

    def _raise_failure(self, output: str, fallback: str) -> None:
        try:
            with fsspec.open(f"{output}/{ERROR_FILE}", "rb") as handle:
                failure = VertexFailure.model_validate_json(handle.read())
        except (OSError, ValueError):
            raise TransientJobError(fallback) from None  # no verdict from the job: worth another try
        raise failure.error()


def _put_params(url: str, data: bytes) -> None:
    """Write the job's params where its task reads them; a store that cannot take them makes the delivery
    transient, as any store outage does."""
    fs, path = url_to_fs(url)
    try:
        fs.makedirs(posixpath.dirname(path), exist_ok=True)  # a local store's folder; nothing on gs://
        fs.pipe_file(path, data)
    except OSError as exc:
        raise TransientJobError(f"cannot write the job's params to {url}: {exc}") from exc


def _remove_params(url: str) -> None:
    """Remove the params of an ended job: positions do not stay in the bucket. A failure is logged, not raised:
    the job's outcome stands, and the object sits under the job's own folder."""
    fs, path = url_to_fs(url)
    try:
        fs.rm(path)
    except OSError as exc:
        log.warning("could not remove the params of an ended Vertex AI job at %s: %s", url, exc)
