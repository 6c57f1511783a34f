"""The local Dask scheduler (a process of its own) and its workers run with the platform's Dask settings."""

from __future__ import annotations

import os
from typing import Any

import pytest

from runtime.manifests.dask_settings import DASK_SETTINGS
from runtime.protocol import contract
from tests.runtime.scheduler import ON_THE_PACKAGE_PLATFORM

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), ON_THE_PACKAGE_PLATFORM]


# Distributed adds this route itself where bokeh is not installed (a page saying the dashboard needs it).
_ADDED_BY_DASK = "distributed.http.scheduler.missing_bokeh"


def _settings() -> dict[str, Any]:
    import dask

    settings = {key: dask.config.get(key) for key in DASK_SETTINGS}
    routes = "distributed.scheduler.http.routes"
    settings[routes] = [route for route in settings[routes] if route != _ADDED_BY_DASK]
    return settings


def _scheduler_process(dask_scheduler: Any) -> dict[str, Any]:
    """What the Dask scheduler's own process sees (run there by ``run_on_scheduler``)."""
    return {"pid": os.getpid(), "settings": _settings(), "monitor_length": dask_scheduler.monitor.maxlen,
            "malloc": os.environ.get(contract.MALLOC_MMAP_THRESHOLD_ENV)}


def test_the_local_dask_scheduler_runs_in_its_own_process_with_the_platforms_settings(platform: Any) -> None:
    from distributed import Client

    cluster = platform.service._cluster  # the SpecCluster the service started for its local pools
    # the local cluster is TLS with credentials of its own (runtime/scheduler/local_cluster.py)
    with Client(cluster.scheduler_address, security=cluster.security, timeout="30s") as client:
        seen = client.run_on_scheduler(_scheduler_process)
        on_workers = client.run(_settings)
    assert seen["pid"] != os.getpid()  # not the gpu-scheduler's process
    assert seen["settings"] == dict(DASK_SETTINGS)
    assert seen["monitor_length"] == DASK_SETTINGS["distributed.admin.system-monitor.log-length"]
    # The setting the scheduler pod gets (runtime/manifests/dask.py), read by glibc as the process starts.
    assert seen["malloc"] == str(contract.MALLOC_MMAP_THRESHOLD_BYTES)
    assert on_workers and all(settings == dict(DASK_SETTINGS) for settings in on_workers.values())
