"""The chaos drill's loopback rows find a stranger's way in, and find none on the platform's own ports."""

from __future__ import annotations

import os
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

import pytest

from runtime.local.vertex_api import start_vertex_api
from runtime.scheduler.local_cluster import start_local_cluster
from runtime.scheduler.settings import Settings
from validation.drills.loopback import dask_listeners, dask_problems, vertex_problems

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Any]:
    settings = Settings.from_env({"GPURT_PROJECT": "p", "GPURT_DEVICE": "cpu", "GPURT_WARM_WORKERS": "false",
                                  "GPURT_RESULT_STORE": (tmp_path / "results").as_uri(),
                                  "GPURT_DASK_DASHBOARD": "127.0.0.1:0"})
    started = start_local_cluster(settings)
    try:
        yield started
    finally:
        started.close()


def test_the_local_dask_scheduler_refuses_both_strangers(cluster: Any) -> None:
    addresses = dask_listeners(os.getpid())
    port = cluster.scheduler_address.rsplit(":", 1)[1]
    assert f"tcp://127.0.0.1:{port}" in addresses
    assert dask_problems(addresses) == []


def test_a_dask_scheduler_without_tls_is_reported() -> None:
    # What the local cluster was before: a plain Dask scheduler, which runs a stranger's function.
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as plain:
        problems = dask_problems([plain.scheduler_address])
    assert problems == [f"a client with no credentials ran a function on the Dask scheduler at "
                        f"{plain.scheduler_address}"]


def test_the_vertex_stand_in_refuses_a_command(tmp_path: Path) -> None:
    handle = start_vertex_api("127.0.0.1", 0, tmp_path / "jobs", token="tok", result_store=tmp_path.as_uri())
    try:
        assert vertex_problems(handle.url, "tok", tmp_path / "pwned") == []
    finally:
        handle.stop()


def test_a_lenient_vertex_stand_in_is_reported(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Lenient(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # accepts everything, and "runs" it
            self.rfile.read(int(self.headers["Content-Length"]))
            marker.touch()
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Lenient)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        problems = vertex_problems(f"http://127.0.0.1:{server.server_address[1]}", "tok", marker)
    finally:
        server.shutdown()
        server.server_close()
    assert problems == ["the Vertex AI stand-in answered a command without the token with 200, not 401",
                        "the Vertex AI stand-in answered a command with the token with 200, not 400",
                        "the Vertex AI stand-in ran a stranger's command"]
