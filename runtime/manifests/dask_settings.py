"""The Dask settings every process of the platform runs with: the Dask scheduler, its workers, clients.

Dask's defaults suit an interactive cluster with a dashboard open. A GPU platform's Dask processes sit
idle between jobs for hours and run for weeks, so two kinds of default cost something here:

- **Idle CPU.** Every event loop checks its own health every 20 ms, every server samples its process
  every 0.5 s, and every worker samples its threads' stacks every 10 ms for the dashboard's profile page.
  On the local platform (the Dask scheduler then inside the gpu-scheduler, a worker per slot) that kept
  an idle gpu-scheduler at 4.2 % of a core and each idle worker at 3.8-4.1 %, measured with these settings
  at 1.1 % and 0.4 %.
- **Memory that fills.** The system monitor keeps its samples by count (7,200: an hour at 0.5 s), the
  developers' logs (transitions, events per topic, the last messages of each connection) 1,000 entries
  each, the log records 10,000, the computations' history 100, each with the task groups it saw. All are
  bounded, but they fill over the first tens of thousands of jobs, which a soak reads as growth.

The values are set in the gpu-scheduler's process where it starts the local Dask cluster (its Dask
scheduler process inherits the parent's Dask config as it starts, its worker processes receive it from
their nannies) and as ``DASK_*`` environment variables on the DaskCluster's scheduler and worker pods.
docs/scheduler.md ("Memory over time") explains each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

# Dask's default HTTP routes, and its HTTP API, which Dask serves only when asked to: the dask-kubernetes
# operator reads the desired worker count (GET /api/v1/adaptive_target) and retires workers gracefully
# (POST /api/v1/retire_workers) through it, on the dashboard port. Without it the operator falls back to the
# scheduler's RPC port, logs "Unable to get desired number of workers" and scales nothing
# (dask_kubernetes.operator.controller: get_desired_workers, retire_workers).
HTTP_ROUTES: Final = (
    "distributed.http.scheduler.prometheus",
    "distributed.http.scheduler.info",
    "distributed.http.scheduler.json",
    "distributed.http.health",
    "distributed.http.proxy",
    "distributed.http.statics",
    "distributed.http.scheduler.api",
)

DASK_SETTINGS: Final[Mapping[str, str | int | bool | list[str]]] = {
    # Idle CPU. A loop blocked longer than the tick limit (3 s) is still reported; it is noticed within
    # half a second instead of 20 ms.
    "distributed.admin.tick.interval": "500ms",
    # Process samples for the dashboard and Dask's own memory figures, every 2 s; 10 minutes kept.
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.system-monitor.log-length": 300,
    # The statistical profiler of every worker thread (the dashboard's profile page): not read here.
    "distributed.worker.profile.enabled": False,
    # Memory. Logs for developers, per log; the last log records; finished computations remembered.
    "distributed.admin.low-level-log-length": 100,
    "distributed.admin.log-length": 1000,
    "distributed.diagnostics.computations.max-history": 10,
    # The operator's autoscaling and graceful scale-down (above).
    "distributed.scheduler.http.routes": list(HTTP_ROUTES),
}


def dask_env(settings: Mapping[str, str | int | bool | list[str]] = DASK_SETTINGS) -> dict[str, str]:
    """The settings as the environment variables Dask reads at start-up (``DASK_`` + the dotted path with
    ``__`` between levels; Dask treats ``-`` and ``_`` in a key alike). Dask parses each value as a
    literal, so ``str`` of a bool or an int reads back as the same value."""
    return {"DASK_" + "__".join(part.upper().replace("-", "_") for part in key.split(".")): str(value)
            for key, value in settings.items()}
