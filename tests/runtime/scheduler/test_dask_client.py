"""PromptClient against real Dask schedulers: its submits leave within 1 ms, also after a reconnect."""

from __future__ import annotations

import asyncio
import socket

import pytest

from runtime.scheduler.backends.dask_client import SEND_INTERVAL_S, PromptClient

RECONNECT_TIMEOUT_S = 30.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_client_sends_to_the_scheduler_with_the_short_window_where_dask_waits_longer() -> None:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            PromptClient(cluster) as prompt, Client(cluster) as plain:
        assert prompt.scheduler_comm.interval == SEND_INTERVAL_S
        assert plain.scheduler_comm.interval > SEND_INTERVAL_S  # what PromptClient exists to shorten
        assert prompt.submit(sum, [1, 2, 3], pure=False).result(timeout=30) == 6


async def _restart_scheduler_under(port: int) -> tuple[float, int]:
    """Connect, restart the Dask scheduler on the same port, wait for the reconnect; the new window and a sum."""
    from distributed import Scheduler, Worker

    scheduler = await Scheduler(host="127.0.0.1", port=port, dashboard_address=None)
    client = await PromptClient(scheduler.address, asynchronous=True, timeout=RECONNECT_TIMEOUT_S)
    try:
        first_stream = client.scheduler_comm
        await scheduler.close()
        async with Scheduler(host="127.0.0.1", port=port, dashboard_address=None) as restarted, \
                Worker(restarted.address, nthreads=1, dashboard_address=None):
            async with asyncio.timeout(RECONNECT_TIMEOUT_S):
                while client.status != "running" or client.scheduler_comm is first_stream:
                    await asyncio.sleep(0.05)
            interval = client.scheduler_comm.interval
            total = await client.submit(sum, [4, 5], pure=False)
            return interval, total
    finally:
        await client.close()


@pytest.mark.timeout(120)
def test_a_client_that_reconnected_after_a_scheduler_restart_keeps_the_short_window() -> None:
    interval, total = asyncio.run(_restart_scheduler_under(_free_port()))
    assert interval == SEND_INTERVAL_S
    assert total == 9
