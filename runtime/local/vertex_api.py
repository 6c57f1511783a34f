"""A local stand-in of the Vertex AI custom-jobs API: Vertex AI overflow on one machine, for real.

It serves the four REST calls the gpu-scheduler makes (``runtime.scheduler.backends.vertex_rest``: create,
get, cancel, list, in the v1 JSON) and runs each custom job's container command and args as a process here
(``python -m runtime.worker.vertex_task ...``: the same arguments, the same output files under the result
store), so the scheduler's real REST client and backend are what the local platform and its tests exercise.
The scheduler points at it with ``GPURT_VERTEX_ENDPOINT``. What it does not model: machine types and
accelerators (the process runs on this machine's devices), provisioning delay, quota and IAM.

``python -m runtime.local.vertex_api --port N --log-dir DIR`` serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
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
from typing import Any, Final

_PARENT: Final = r"projects/[^/]+/locations/[^/]+"
_CREATE_OR_LIST: Final = re.compile(rf"^/v1/({_PARENT})/customJobs$")
_ONE: Final = re.compile(rf"^/v1/({_PARENT}/customJobs/[^/:]+)(:cancel)?$")
_LABEL_TERM: Final = re.compile(r'^labels\.([a-z0-9_-]+)\s*=\s*"?([^"]*)"?$')
_DISPLAY_NAME_TERM: Final = re.compile(r'^display_name\s*[:=]\s*"?([^"*]*)(\*?)"?$')
_TERMINATE_GRACE_S: Final = 5.0
_RUNNING: Final = "JOB_STATE_RUNNING"


@dataclass
class _Job:
    """One custom job: its resource as the service returns it, and the process that runs it."""

    resource: dict[str, Any]
    process: subprocess.Popen[bytes] | None = None
    cancelled: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class VertexStandIn:
    """The custom jobs of this stand-in, and the processes that run them (one per job)."""

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()

    def create(self, parent: str, body: dict[str, Any]) -> dict[str, Any]:
        """Start the job's container command as a process; the created resource (``JOB_STATE_RUNNING``)."""
        pool = body["jobSpec"]["workerPoolSpecs"][0]
        container = pool["containerSpec"]
        # The image's python is this machine's: the worker's code is installed beside this one.
        command = [sys.executable if part == "python" else part for part in container.get("command", [])]
        name = f"{parent}/customJobs/{uuid.uuid4().int % 10**18}"
        now = _now()
        resource = {**body, "name": name, "state": _RUNNING, "createTime": now, "startTime": now, "updateTime": now}
        job = _Job(resource)
        with self._lock:
            self._jobs[name] = job
        self._log_dir.mkdir(parents=True, exist_ok=True)
        with open(self._log_dir / f"{name.rsplit('/', 1)[1]}.log", "wb") as log:
            job.process = subprocess.Popen([*command, *container.get("args", [])], stdout=log,
                                           stderr=subprocess.STDOUT, start_new_session=True)
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
        path = self.path.split("?", 1)[0]
        if match := _CREATE_OR_LIST.match(path):
            length = int(self.headers.get("Content-Length") or 0)
            self._answer(HTTPStatus.OK, self.server.jobs.create(match.group(1), json.loads(self.rfile.read(length))))
        elif (match := _ONE.match(path)) and match.group(2):
            found = self.server.jobs.cancel(match.group(1))
            self._answer(HTTPStatus.OK, {}) if found else self._error(HTTPStatus.NOT_FOUND, "NOT_FOUND", path)
        else:
            self._error(HTTPStatus.NOT_FOUND, "NOT_FOUND", path)

    def do_GET(self) -> None:
        from urllib.parse import parse_qs, urlsplit

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

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the jobs' own logs are what matters."""

    def _answer(self, status: HTTPStatus, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: HTTPStatus, code: str, message: str) -> None:
        self._answer(status, {"error": {"code": status.value, "message": message, "status": code}})


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], jobs: VertexStandIn) -> None:
        super().__init__(address, _Handler)
        self.jobs = jobs


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


def start_vertex_api(host: str, port: int, log_dir: Path) -> VertexApiHandle:
    """Serve the stand-in on ``host:port`` (0: a free port) from a thread; jobs' output goes to ``log_dir``."""
    jobs = VertexStandIn(log_dir)
    server = _Server((host, port), jobs)
    thread = threading.Thread(target=server.serve_forever, name="vertex-api", daemon=True)
    thread.start()
    return VertexApiHandle(f"http://{host}:{server.server_address[1]}", jobs, server, thread)


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(description="A local stand-in of the Vertex AI custom-jobs API.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-dir", type=Path, required=True, help="Where each custom job's output goes.")
    args = parser.parse_args(argv)
    handle = start_vertex_api(args.host, args.port, args.log_dir)
    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopped.set())
    stopped.wait()
    handle.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
