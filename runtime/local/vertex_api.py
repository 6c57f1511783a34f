"""A local stand-in of the Vertex AI custom-jobs API: Vertex AI overflow on one machine, for real.

It serves the four REST calls the gpu-scheduler makes (``runtime.vertex.rest``: create,
get, cancel, list, in the v1 JSON) and runs each custom job as a process here (``python -m
runtime.worker.vertex_task ...``: the same arguments, the same output files under the result store), so the
scheduler's real REST client and backend are what the local platform and its tests exercise. The scheduler
points at it with ``GPURT_VERTEX_ENDPOINT``. What it does not model: machine types and accelerators (the
process runs on this machine's devices), provisioning delay, quota and IAM roles.

Real Vertex AI runs any container for a caller that holds ``aiplatform.customJobs.create``; this stand-in runs
processes as the platform's user, with no container around them, so it runs one thing only, for one caller:

- **Who.** Every call needs ``Authorization: Bearer <the platform's control token>`` (the real API requires an
  OAuth token of the cloud-platform scope, https://cloud.google.com/vertex-ai/docs/reference/rest/v1/
  projects.locations.customJobs/create); without it the answer is the API's 401 ``UNAUTHENTICATED``, before
  the body is read (https://cloud.google.com/apis/design/errors). A browser page cannot set that header on a
  cross-origin request without a CORS preflight, which this server never grants.
- **What.** A create must be the custom job ``runtime.scheduler.backends.vertex`` builds: the worker's entry
  point (``runtime.worker.vertex_task.ENTRY_POINT``), its ``task_args`` for a known job type and a folder under
  the result store's ``vertex/<job_id>/<attempt>``, one worker pool, the local image, no other field. The
  process is built from those checked values, never from the body's command. Anything else is the API's 400
  ``INVALID_ARGUMENT`` (as Google answers an unknown JSON field: "Invalid JSON payload received").

``python -m runtime.local.vertex_api --port N --log-dir DIR --result-store URL --token-file FILE`` serves until
SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernels.params import JobType
from runtime.local.stop_signal import StopSignal
from runtime.protocol.messages import JOB_ID_PATTERN
from runtime.scheduler.backends.vertex import VERTEX_FOLDER
from runtime.worker.vertex_task import ENTRY_POINT, task_args

# The image the local platform names for its custom jobs (GPURT_VERTEX_IMAGE): this machine's python and code.
LOCAL_IMAGE: Final = "local"
# A custom job the scheduler builds is a few hundred bytes (its params travel by reference).
MAX_BODY_BYTES: Final = 64 * 1024
_PARENT: Final = r"projects/[^/]+/locations/[^/]+"
_CREATE_OR_LIST: Final = re.compile(rf"^/v1/({_PARENT})/customJobs$")
_ONE: Final = re.compile(rf"^/v1/({_PARENT}/customJobs/[^/:]+)(:cancel)?$")
_LABEL_TERM: Final = re.compile(r'^labels\.([a-z0-9_-]+)\s*=\s*"?([^"]*)"?$')
_DISPLAY_NAME_TERM: Final = re.compile(r'^display_name\s*[:=]\s*"?([^"*]*)(\*?)"?$')
_TERMINATE_GRACE_S: Final = 5.0
_RUNNING: Final = "JOB_STATE_RUNNING"


class InvalidArgument(ValueError):
    """A create that is not the worker's own task: the API's 400 ``INVALID_ARGUMENT``."""


class _Strict(BaseModel):
    # Google's JSON mapping refuses a field the message does not have (400 INVALID_ARGUMENT).
    model_config = ConfigDict(extra="forbid", strict=True)


class _Container(_Strict):
    imageUri: Literal["local"]  # LOCAL_IMAGE
    command: list[str]
    args: list[str]


class _Pool(_Strict):
    replicaCount: Literal["1"]
    machineSpec: dict[str, str | int]
    containerSpec: _Container


class _Scheduling(_Strict):
    timeout: str = Field(pattern=r"^[0-9]{1,9}s$")


class _JobSpec(_Strict):
    workerPoolSpecs: list[_Pool] = Field(min_length=1, max_length=1)
    scheduling: _Scheduling | None = None
    serviceAccount: str | None = None


class _CustomJob(_Strict):
    displayName: str = Field(min_length=1, max_length=128)
    jobSpec: _JobSpec
    labels: dict[str, str] = Field(default_factory=dict)


def worker_args(body: object, result_store: str) -> list[str]:
    """The ``vertex_task`` arguments of ``body`` if it is the worker's own custom job, whose folder is under
    ``result_store``; raises ``InvalidArgument`` (with the reason) for anything else."""
    try:
        job = _CustomJob.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidArgument(f"Invalid JSON payload received: {where}: {first['msg']}") from None
    container = job.jobSpec.workerPoolSpecs[0].containerSpec
    if tuple(container.command) != ENTRY_POINT:
        raise InvalidArgument(f"this stand-in runs only the worker's entry point {' '.join(ENTRY_POINT)}")
    args = container.args
    kinds = {kind.value for kind in JobType}
    if len(args) < 2 or args[0] != "--job-type" or args[1] not in kinds:
        raise InvalidArgument(f"the args must start --job-type <one of {sorted(kinds)}>")
    folder = re.compile(rf"{re.escape(result_store.rstrip('/'))}/{VERTEX_FOLDER}/{JOB_ID_PATTERN[1:-1]}/[0-9]{{1,9}}")
    output = args[-1]
    if not folder.fullmatch(output) or args != task_args(args[1], output):
        raise InvalidArgument(f"the args must be the worker's task for a folder under "
                              f"{result_store.rstrip('/')}/{VERTEX_FOLDER}/<job_id>/<attempt>")
    return args


@dataclass
class _Job:
    """One custom job: its resource as the service returns it, and the process that runs it."""

    resource: dict[str, Any]
    process: subprocess.Popen[bytes] | None = None
    cancelled: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class VertexStandIn:
    """The custom jobs of this stand-in, and the processes that run them (one per job)."""

    def __init__(self, log_dir: Path, result_store: str) -> None:
        self._log_dir = log_dir
        self._result_store = result_store
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()

    def create(self, parent: str, body: object) -> dict[str, Any]:
        """Start the worker's task that ``body`` describes as a process; the created resource
        (``JOB_STATE_RUNNING``). Raises ``InvalidArgument`` for a body that is not the worker's own task."""
        args = worker_args(body, self._result_store)
        assert isinstance(body, dict)  # worker_args has checked its shape
        # The image's python is this machine's: the worker's code is installed beside this one.
        command = [sys.executable, *ENTRY_POINT[1:], *args]
        name = f"{parent}/customJobs/{uuid.uuid4().int % 10**18}"
        now = _now()
        resource = {**body, "name": name, "state": _RUNNING, "createTime": now, "startTime": now, "updateTime": now}
        job = _Job(resource)
        with self._lock:
            self._jobs[name] = job
        self._log_dir.mkdir(parents=True, exist_ok=True)
        with open(self._log_dir / f"{name.rsplit('/', 1)[1]}.log", "wb") as log:
            job.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        timeout = float(str(body["jobSpec"].get("scheduling", {}).get("timeout", "0s")).rstrip("s") or 0)
        threading.Thread(target=self._watch, args=(job, timeout or None), name=f"vertex-{name}", daemon=True).start()
        return dict(resource)

    def get(self, name: str) -> dict[str, Any] | None:
        """The job's resource, or None if there is no such job."""
        with self._lock:
            job = self._jobs.get(name)
        if job is None:
            return None
        with job.lock:
            return dict(job.resource)

    def cancel(self, name: str) -> bool:
        """Stop the job's process; it ends ``JOB_STATE_CANCELLED``. False if there is no such job."""
        with self._lock:
            job = self._jobs.get(name)
        if job is None:
            return False
        with job.lock:
            job.cancelled = True
        _terminate(job.process)
        return True

    def list(self, parent: str, filter_: str, page_size: int) -> list[dict[str, Any]]:
        """The newest ``page_size`` jobs under ``parent`` that match ``filter_`` (``labels.K=V`` and
        ``display_name`` terms joined by AND); raises ValueError for a filter it does not understand."""
        terms = [term.strip() for term in re.split(r"\s+AND\s+", filter_) if term.strip()]
        checks = [_term(term) for term in terms]
        with self._lock:
            jobs = [job for name, job in self._jobs.items() if name.startswith(f"{parent}/")]
        resources = []
        for job in jobs:
            with job.lock:
                resources.append(dict(job.resource))
        matching = [r for r in resources if all(check(r) for check in checks)]
        return sorted(matching, key=lambda r: r["createTime"], reverse=True)[:page_size]

    def stop(self) -> None:
        """Stop every running job's process."""
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            _terminate(job.process)

    def _watch(self, job: _Job, timeout_s: float | None) -> None:
        assert job.process is not None
        try:
            code = job.process.wait(timeout=timeout_s)
            error = None if code == 0 else f"The replica workerpool0-0 exited with a non-zero status of {code}."
        except subprocess.TimeoutExpired:
            _terminate(job.process)
            error = f"Job exceeded its timeout of {timeout_s:g}s."
        with job.lock:
            if job.cancelled:
                state = "JOB_STATE_CANCELLED"
            elif error is None:
                state = "JOB_STATE_SUCCEEDED"
            else:
                state = "JOB_STATE_FAILED"
                job.resource["error"] = {"code": 3, "message": error}
            job.resource.update(state=state, endTime=_now(), updateTime=_now())


def _term(term: str) -> Any:
    label = _LABEL_TERM.match(term)
    if label:
        key, value = label.groups()
        return lambda r: r.get("labels", {}).get(key) == value
    display = _DISPLAY_NAME_TERM.match(term)
    if display:
        text, wildcard = display.groups()
        return (lambda r: r["displayName"].startswith(text)) if wildcard else (lambda r: r["displayName"] == text)
    raise ValueError(f"unsupported filter term {term!r}")


def _terminate(process: subprocess.Popen[bytes] | None) -> None:
    if process is None or process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=_TERMINATE_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        if not self._authenticated():
            return
        path = self.path.split("?", 1)[0]
        if match := _CREATE_OR_LIST.match(path):
            try:
                created = self.server.jobs.create(match.group(1), self._body())
            except InvalidArgument as exc:
                return self._error(HTTPStatus.BAD_REQUEST, "INVALID_ARGUMENT", str(exc))
            self._answer(HTTPStatus.OK, created)
        elif (match := _ONE.match(path)) and match.group(2):
            found = self.server.jobs.cancel(match.group(1))
            self._answer(HTTPStatus.OK, {}) if found else self._error(HTTPStatus.NOT_FOUND, "NOT_FOUND", path)
        else:
            self._error(HTTPStatus.NOT_FOUND, "NOT_FOUND", path)

    def do_GET(self) -> None:
        from urllib.parse import parse_qs, urlsplit

        if not self._authenticated():
            return
        url = urlsplit(self.path)
        query = {key: values[0] for key, values in parse_qs(url.query).items()}
        if match := _CREATE_OR_LIST.match(url.path):
            try:
                jobs = self.server.jobs.list(match.group(1), query.get("filter", ""), int(query.get("pageSize", 100)))
            except ValueError as exc:
                return self._error(HTTPStatus.BAD_REQUEST, "INVALID_ARGUMENT", str(exc))
            return self._answer(HTTPStatus.OK, {"customJobs": jobs})
        if (match := _ONE.match(url.path)) and not match.group(2):
            job = self.server.jobs.get(match.group(1))
            return self._answer(HTTPStatus.OK, job) if job else self._error(HTTPStatus.NOT_FOUND, "NOT_FOUND", url.path)
        return self._error(HTTPStatus.NOT_FOUND, "NOT_FOUND", url.path)

    def _authenticated(self) -> bool:
        """Whether the request bears the platform's token; if not, it has been answered 401 (unread)."""
        scheme, _, given = self.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.server.token.encode()):
            return True
        self.close_connection = True  # the body, if any, is never read
        self._error(HTTPStatus.UNAUTHORIZED, "UNAUTHENTICATED", "Request is missing required authentication "
                    "credential. Expected the platform's control token as a bearer token.",
                    {"WWW-Authenticate": "Bearer"})
        return False

    def _body(self) -> object:
        """The request's JSON body; raises ``InvalidArgument`` for a missing, oversized or malformed one."""
        try:
            length = int(self.headers.get("Content-Length") or "")
        except ValueError:
            raise InvalidArgument("a JSON body with its Content-Length is required") from None
        if not 0 < length <= MAX_BODY_BYTES:
            self.close_connection = True
            raise InvalidArgument(f"the body must be 1 to {MAX_BODY_BYTES} bytes")
        try:
            return json.loads(self.rfile.read(length))
        except ValueError:
            raise InvalidArgument("Invalid JSON payload received.") from None

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the jobs' own logs are what matters."""

    def _answer(self, status: HTTPStatus, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: HTTPStatus, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        self._answer(status, {"error": {"code": status.value, "message": message, "status": code}}, headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], jobs: VertexStandIn, token: str) -> None:
        super().__init__(address, _Handler)
        self.jobs = jobs
        self.token = token


@dataclass
class VertexApiHandle:
    """A running stand-in: its base URL (``GPURT_VERTEX_ENDPOINT``) and its jobs."""

    url: str
    jobs: VertexStandIn
    _server: _Server
    _thread: threading.Thread

    def stop(self) -> None:
        """Stop serving and stop every job's process."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
        self.jobs.stop()


def start_vertex_api(host: str, port: int, log_dir: Path, *, token: str, result_store: str) -> VertexApiHandle:
    """Serve the stand-in on ``host:port`` (0: a free port) from a thread, to callers bearing ``token``; jobs'
    output goes to ``log_dir``, their folders must be under ``result_store``."""
    if not token:
        raise ValueError("the Vertex AI stand-in needs a token: it runs processes for whoever holds it")
    jobs = VertexStandIn(log_dir, result_store)
    server = _Server((host, port), jobs, token)
    thread = threading.Thread(target=server.serve_forever, name="vertex-api", daemon=True)
    thread.start()
    return VertexApiHandle(f"http://{host}:{server.server_address[1]}", jobs, server, thread)


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(description="A local stand-in of the Vertex AI custom-jobs API.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-dir", type=Path, required=True, help="Where each custom job's output goes.")
    parser.add_argument("--result-store", required=True, help="fsspec URL of the result store (the jobs' folders).")
    parser.add_argument("--token-file", type=Path, required=True,
                        help="A file holding the bearer token callers must present (never the token itself: "
                             "arguments show in ps).")
    args = parser.parse_args(argv)
    try:
        token = args.token_file.read_text().strip()
    except OSError as exc:
        parser.error(f"cannot read --token-file: {exc}")
    handle = start_vertex_api(args.host, args.port, args.log_dir, token=token, result_store=args.result_store)
    StopSignal().wait()
    handle.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
