"""Dask worker preload: compile every kernel before the worker joins the cluster (docs/scheduler.md, "Warm workers").

The DaskCluster's workers load it with ``dask worker --preload`` (``contract.DASK_WORKER_PRELOAD``), the
local platform's through the LocalCluster's ``preload`` option. Dask runs a preload's ``dask_setup``
while the worker starts, *before* it registers with the Dask scheduler: no job can be assigned to a worker
whose kernels are still cold. A ``WorkerPlugin`` registered with the Dask scheduler would be set up only
after registration, when jobs may already be waiting for that worker.

The device is ``GPURT_DEVICE`` of the worker's environment (the local platform passes the scheduler's);
unset, ``auto``: the GPU where there is one. The seconds each warm-up job took are kept on the worker
(``WARM_ATTRIBUTE``), for ``gpurt bench utilization`` to report a worker's start-up cost.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Final

from runtime.scheduler.settings import DEVICE_ENV

# The worker attribute that holds {warm-up job: seconds} once the kernels are warm.
WARM_ATTRIBUTE: Final = "gpurt_warm_s"

log = logging.getLogger(__name__)


def dask_setup(worker: Any) -> None:
    """Dask's preload hook: run one tiny job of each kernel type on this worker's device."""
    from kernels.warm import warm_kernels

    device = os.environ.get(DEVICE_ENV) or "auto"
    started = time.perf_counter()
    seconds = warm_kernels(device)
    setattr(worker, WARM_ATTRIBUTE, seconds)
    log.info("kernels warm on device %s in %.1f s: %s", device, time.perf_counter() - started,
             ", ".join(f"{name} {s:.2f} s" for name, s in seconds.items()))


def warm_seconds(dask_worker: Any) -> dict[str, float]:
    """What the preload measured on ``dask_worker`` (run it with ``Client.run``); empty if it did not run."""
    return dict(getattr(dask_worker, WARM_ATTRIBUTE, {}))
