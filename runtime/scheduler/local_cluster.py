"""The local Dask cluster, where no Dask scheduler address is given: a scheduler process, Nanny workers.

What a ``LocalCluster(processes=True)`` would start, except that its Dask scheduler runs in a process of
its own (``runtime.scheduler.dask_process``) instead of the gpu-scheduler's, as the DaskCluster's scheduler pod does
on GKE. The workers are Nanny processes as LocalCluster makes them; none start here: ``LocalPools`` adds
them per pool from the cluster's worker template (``new_spec``).
"""

from __future__ import annotations

import logging
from typing import Any, Final

from runtime.protocol import contract
from runtime.scheduler.dask_process import DaskSchedulerProcess
from runtime.scheduler.settings import Settings

# Every process of the local cluster listens on the loopback interface only.
LOCAL_HOST: Final = "127.0.0.1"
# The gpu-scheduler's own Dask logging (its client, the nannies) and the workers' log warnings and up,
# as LocalCluster's default silence_logs has them.
SILENCE_LOGS: Final = logging.WARNING
# How often each nanny (an object in this process) and its worker read the worker's memory. Dask's 100 ms
# cost this process 5 ms of CPU per second per worker while idle; a second still restarts a worker past
# its memory limit within about a second. Local only: on GKE the nannies run in the worker pods.
LOCAL_MEMORY_MONITOR: Final = {"distributed.worker.memory.monitor-interval": "1s"}


def worker_template(settings: Settings) -> dict[str, Any]:
    """The spec of one worker: a Nanny process with one thread (one job at a time) on the loopback
    interface, the scheduler's device, and the kernels compiled as it starts when ``warm_workers``
    (``runtime.worker.warm``, docs/scheduler.md "Warm workers")."""
    from distributed import Nanny

    preload = [contract.DASK_WORKER_PRELOAD] if settings.warm_workers else []
    return {"cls": Nanny, "options": {"host": LOCAL_HOST, "nthreads": 1, "dashboard": False,
                                      "silence_logs": SILENCE_LOGS, "preload": preload,
                                      "env": {contract.SchedulerEnv.DEVICE: settings.device}}}


def scheduler_spec(settings: Settings) -> dict[str, Any]:
    """The spec of the Dask scheduler process: loopback, any free port, its dashboard (which also serves
    Dask's Prometheus /metrics) at ``settings.dask_dashboard``."""
    return {"cls": DaskSchedulerProcess,
            "options": {"scheduler_kwargs": {"host": LOCAL_HOST, "port": 0, "dashboard": True,
                                             "dashboard_address": settings.dask_dashboard}}}


def start_local_cluster(settings: Settings) -> Any:
    """Start the Dask scheduler process and return the ``distributed.SpecCluster``, with no workers yet.

    Call it after setting the Dask config (``runtime.manifests.dask_settings``): the scheduler process inherits the
    config of this one as it starts, and each worker's nanny hands it the same.
    """
    import dask
    from distributed import SpecCluster

    dask.config.set(LOCAL_MEMORY_MONITOR)  # for the process: the nannies start later, as pools grow
    return SpecCluster(scheduler=scheduler_spec(settings), worker=worker_template(settings), workers={},
                       silence_logs=SILENCE_LOGS)
