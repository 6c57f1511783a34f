"""The chaos drill's loopback rows: a stranger on the machine tries the local ports that would run its code.

Any process of the machine reaches loopback (a browser page can POST to it too), so these ports must
refuse whoever is not the platform (docs/local-platform.md, docs/scheduler.md "The local Dask cluster"):

- **Dask scheduler** of every replica: a client with no credentials (plain TCP, as the re-test's
  ``Client(address).run_on_scheduler(...)``) and one with credentials of its own (TLS, a certificate the
  cluster's CA did not sign) must both fail to run a function there;
- **Vertex AI stand-in**, when the platform runs one (``--overflow-after``): the re-test's POST, a custom job
  whose command is ``touch <file>``, must be refused with 401 without the control token and with 400 with
  it, and the file must not appear.
"""

from __future__ import annotations

import os
from http import HTTPStatus
from pathlib import Path
from typing import Any, Final

import httpx
import psutil

from runtime.access.local_state import VERTEX_API
from runtime.protocol.contract import DASK_SCHEDULER_MODULE
from validation.drills.base import DrillContext, DrillFailed

# A refused client gives up at the handshake; one that is let in answers within this too.
CONNECT_TIMEOUT_S: Final = 5.0
# The stand-in's REST path for creating a custom job (any project and location).
CREATE_PATH: Final = "/v1/projects/drill/locations/us-central1/customJobs"


def run(ctx: DrillContext) -> None:
    """Try every replica's Dask scheduler and the Vertex AI stand-in as a stranger; raises ``DrillFailed``."""
    addresses = [address for record in ctx.state.processes if record.api_url
                 for address in dask_listeners(record.pid)]
    problems = [] if addresses else ["found no Dask scheduler listening under the replicas"]
    problems += dask_problems(addresses)
    vertex = next((record for record in ctx.state.processes if record.name == VERTEX_API), None)
    if vertex is not None:
        marker = ctx.directory / f"pwned-{ctx.run_id}"
        problems += vertex_problems(_url(vertex.command), ctx.state.control_token, marker)
    if problems:
        raise DrillFailed("loopback: " + "; ".join(problems))
    ctx.note(f"loopback: {len(addresses)} Dask port(s) refused a client without the cluster's credentials"
             + ("; the Vertex AI stand-in refused a command (401 without the token, 400 with it)" if vertex else ""))


def dask_listeners(scheduler_pid: int) -> list[str]:
    """``tcp://`` addresses of the comm ports of the Dask scheduler process under ``scheduler_pid`` (the ports
    it listens on but its dashboard, which answers HTTP and runs nothing)."""
    found = []
    for child in psutil.Process(scheduler_pid).children(recursive=True):
        try:
            if DASK_SCHEDULER_MODULE not in child.cmdline():
                continue
            listening = [c.laddr for c in child.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]
        except psutil.Error:  # ended meanwhile
            continue
        found += [f"tcp://{ip}:{port}" for ip, port in listening if not _answers_http(ip, port)]
    return found


def dask_problems(addresses: list[str]) -> list[str]:
    """The addresses at which a stranger ran a function on the Dask scheduler (with no credentials, or its own)."""
    from distributed.security import Security

    strangers: list[tuple[str, Any]] = [("no credentials", None), ("credentials of its own", Security.temporary())]
    problems = []
    for address in addresses:
        for who, security in strangers:
            target = address.replace("tcp://", "tls://") if security is not None else address
            if _runs_code(target, security):
                problems.append(f"a client with {who} ran a function on the Dask scheduler at {address}")
    return problems


def vertex_problems(url: str, token: str, marker: Path) -> list[str]:
    """What the Vertex AI stand-in at ``url`` let through of a ``touch marker`` custom job."""
    body = {"displayName": "drill", "jobSpec": {"workerPoolSpecs": [{
        "replicaCount": "1", "machineSpec": {"machineType": "drill"},
        "containerSpec": {"imageUri": "local", "command": ["sh", "-c", f"touch {marker}"], "args": []}}]}}
    problems = []
    for who, headers, expected in (("without the token", {}, 401),
                                   ("with the token", {"Authorization": f"Bearer {token}"}, 400)):
        try:
            status = httpx.post(url + CREATE_PATH, json=body, headers=headers, timeout=CONNECT_TIMEOUT_S).status_code
        except httpx.HTTPError as exc:
            problems.append(f"the Vertex AI stand-in did not answer a command {who}: {exc}")
            continue
        if status != expected:
            problems.append(f"the Vertex AI stand-in answered a command {who} with {status}, not {expected}")
    if marker.exists():
        marker.unlink()
        problems.append("the Vertex AI stand-in ran a stranger's command")
    return problems


def _runs_code(address: str, security: Any) -> bool:
    from distributed import Client

    try:
        with Client(address, timeout=f"{CONNECT_TIMEOUT_S:g}s", security=security, set_as_default=False) as client:
            return client.run_on_scheduler(os.getpid) > 0
    # A TLS client at a plain port fails its handshake as an OSError, or, when the server has already written or
    # closed, as tornado's ValueError ("IOStream is not idle; cannot convert to SSL"): either way, no code ran.
    except (OSError, TimeoutError, ValueError):
        return False


def _answers_http(host: str, port: int) -> bool:
    # A Dask client waits on an HTTP server for a handshake that never comes; the dashboard answers /health.
    try:
        return httpx.get(f"http://{host}:{port}/health", timeout=CONNECT_TIMEOUT_S).status_code == HTTPStatus.OK
    except httpx.HTTPError:
        return False


def _url(command: list[str]) -> str:
    """The stand-in's base URL, from the command the platform started it with."""
    return f"http://{command[command.index('--host') + 1]}:{command[command.index('--port') + 1]}"
