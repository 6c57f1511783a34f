"""The in-process Dask scheduler and its workers run with the platform's Dask settings."""

from __future__ import annotations

from typing import Any

import pytest

from manifests.dask_settings import DASK_SETTINGS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _settings() -> dict[str, Any]:
    import dask

    return {key: dask.config.get(key) for key in DASK_SETTINGS}


def test_the_local_cluster_and_its_workers_run_with_the_platforms_dask_settings(platform: Any) -> None:
    from distributed import Client

    cluster = platform.service._cluster  # the LocalCluster the service started for its local pools
    assert cluster.scheduler.monitor.maxlen == DASK_SETTINGS["distributed.admin.system-monitor.log-length"]
    with Client(cluster.scheduler_address, timeout="30s") as client:
        on_workers = client.run(_settings)
    assert on_workers and all(settings == dict(DASK_SETTINGS) for settings in on_workers.values())
