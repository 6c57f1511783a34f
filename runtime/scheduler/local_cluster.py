"""The local Dask cluster, where no Dask scheduler address is given: a scheduler process, Nanny workers.

What a ``LocalCluster(processes=True)`` would start, except that its Dask scheduler runs in a process of
its own (``runtime.scheduler.dask_process``) instead of the gpu-scheduler's, as the DaskCluster's scheduler pod does
on GKE. The workers are Nanny processes as LocalCluster makes them; none start here: ``LocalPools`` adds
them per pool from the cluster's worker template (``new_spec``).

**TLS, with credentials of its own.** A Dask scheduler runs whatever a connected client sends
(``Client(address).run_on_scheduler(...)``), so a plain TCP port on loopback would run code for any process
of the machine. Every connection of the local cluster is therefore TLS with mutual authentication
(Dask's ``distributed.security.Security``, https://distributed.dask.org/en/stable/tls.html): as the cluster
starts, a key and a self-signed certificate that is its own CA are made for it (``Security.temporary``'s
recipe) and written 0600 into a fresh 0700 folder, which goes when the cluster goes. The Dask scheduler
process, the workers (through their nannies) and the gpu-scheduler's client present that certificate and
accept only peers that present it too; a client without it cannot complete the handshake. The files, not
their contents, are what the Dask scheduler process is given: its options travel on its command line.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import weakref
from pathlib import Path
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


CERT_FILE: Final = "dask-cert.pem"
KEY_FILE: Final = "dask-key.pem"
_ROLES: Final = ("client", "scheduler", "worker")


def write_credentials(folder: Path) -> dict[str, Any]:
    """Make a key and a self-signed certificate (its own CA) and write them 0600 into ``folder``; the keyword
    arguments of ``distributed.security.Security`` (plain strings, for every role) that use them."""
    from distributed.security import Security

    made = Security.temporary()  # Dask's own recipe: one RSA key, a certificate it signs itself
    for name, text in ((CERT_FILE, made.tls_ca_file), (KEY_FILE, made.tls_scheduler_key)):
        descriptor = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(text)
    cert, key = str(folder / CERT_FILE), str(folder / KEY_FILE)
    return {"require_encryption": True, "tls_ca_file": cert,
            **{f"tls_{role}_cert": cert for role in _ROLES}, **{f"tls_{role}_key": key for role in _ROLES}}


def worker_template(settings: Settings, security: Any) -> dict[str, Any]:
    """The spec of one worker: a Nanny process with one thread (one job at a time) on the loopback
    interface, the scheduler's device, the cluster's TLS ``security``, and the kernels compiled as it starts
    when ``warm_workers`` (``runtime.worker.warm``, docs/scheduler.md "Warm workers")."""
    from distributed import Nanny

    preload = [contract.DASK_WORKER_PRELOAD] if settings.warm_workers else []
    return {"cls": Nanny, "options": {"host": LOCAL_HOST, "nthreads": 1, "dashboard": False,
                                      "silence_logs": SILENCE_LOGS, "preload": preload, "security": security,
                                      "env": {contract.SchedulerEnv.DEVICE: settings.device}}}


def scheduler_spec(settings: Settings, credentials: dict[str, Any]) -> dict[str, Any]:
    """The spec of the Dask scheduler process: loopback, any free port, TLS with ``credentials``
    (``write_credentials``), its dashboard (which also serves Dask's Prometheus /metrics) at
    ``settings.dask_dashboard``."""
    return {"cls": DaskSchedulerProcess,
            "options": {"scheduler_kwargs": {"host": LOCAL_HOST, "port": 0, "dashboard": True,
                                             "dashboard_address": settings.dask_dashboard},
                        "security": credentials}}


def start_local_cluster(settings: Settings) -> Any:
    """Start the Dask scheduler process and return the ``distributed.SpecCluster``, with no workers yet.

    Call it after setting the Dask config (``runtime.manifests.dask_settings``): the scheduler process inherits the
    config of this one as it starts, and each worker's nanny hands it the same.
    """
    import dask
    from distributed import SpecCluster
    from distributed.security import Security

    dask.config.set(LOCAL_MEMORY_MONITOR)  # for the process: the nannies start later, as pools grow
    folder = Path(tempfile.mkdtemp(prefix="gpurt-dask-tls-"))  # 0700, this user's alone
    try:
        credentials = write_credentials(folder)
        security = Security(**credentials)
        cluster = SpecCluster(scheduler=scheduler_spec(settings, credentials),
                              worker=worker_template(settings, security), workers={}, security=security,
                              silence_logs=SILENCE_LOGS)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    # The credentials go with the cluster (or with this process, at its exit); a SIGKILL leaves the folder
    # in the temporary directory, readable by this user only.
    weakref.finalize(cluster, shutil.rmtree, folder, ignore_errors=True)
    return cluster
