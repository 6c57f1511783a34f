"""The local Dask scheduler in a process of its own, as the DaskCluster's scheduler pod is on GKE.

Inside the gpu-scheduler's process, the Dask scheduler's event loop, per-task handling, heartbeats and
system monitor cost that process CPU per job and while it waits (docs/scheduler.md, "Per-job cost").
``DaskSchedulerProcess`` is the scheduler of the local ``SpecCluster`` (``runtime.scheduler.local_cluster``); it
runs ``python -m runtime.scheduler.dask_process``, the child side below.

- **Same settings as in-process.** The child gets the parent's whole Dask config through
  ``DASK_INTERNAL_INHERIT_CONFIG`` (how Dask's own deployments hand config to a process they start) and
  none of the parent's ``DASK_*`` variables, which the parent's config already holds and which would
  otherwise override it there. It also gets the glibc mmap threshold the scheduler pod gets
  (``contract.MALLOC_MMAP_THRESHOLD_ENV``, ``runtime/manifests/dask.py``).
- **Its lifetime is its parent's.** The parent stops it as the cluster closes. The child ignores SIGINT
  and SIGTERM, which reach the whole process group (a Ctrl-C, ``gpurt local down``): the gpu-scheduler
  drains its in-flight jobs after such a signal, and they need the Dask scheduler until it is done. If the
  parent dies without closing it (SIGKILL, a crash), the child's stdin, a pipe whose other end only the
  parent holds, reads end of file, and the child exits at once - how Dask's own worker processes notice a
  dead nanny. A SIGKILL of the whole group ends it with the rest.
- **Its address comes back on stdout**, the one line the child writes there; everything else it prints
  goes to stderr, which is the gpu-scheduler's own (its log).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping
from typing import IO, Any, Final

import dask.config
from distributed.deploy.subprocess import SubprocessScheduler

from runtime.protocol import contract

# The child's module (``python -m``), as the parent starts it and as the drills and benchmarks find it among the
# gpu-scheduler's children.
CHILD_MODULE: Final = contract.DASK_SCHEDULER_MODULE
# Starting the process and importing distributed (and the dashboard's bokeh) takes seconds; more on a
# loaded machine.
START_TIMEOUT_S: Final = 60
# The variable Dask reads its inherited, serialized config from (dask.config.collect_env).
INHERIT_CONFIG_ENV: Final = "DASK_INTERNAL_INHERIT_CONFIG"
# The Dask scheduler logs at this level and above, as the LocalCluster in the gpu-scheduler's process did
# (its silence_logs); INFO would log every client and worker connection.
DASK_LOG_LEVEL: Final = logging.WARNING

# The option of the child's JSON that carries its ``Security`` keyword arguments (the rest go to ``Scheduler``).
SECURITY_OPTION: Final = "security"

log = logging.getLogger(__name__)


def child_env(config: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment of the Dask scheduler process: ``environ`` without its ``DASK_*`` variables, plus
    ``config`` (the parent's Dask config) to inherit and the scheduler pod's malloc setting."""
    env = {key: value for key, value in environ.items() if not key.startswith("DASK_")}
    env[INHERIT_CONFIG_ENV] = dask.config.serialize(config)
    env[contract.MALLOC_MMAP_THRESHOLD_ENV] = str(contract.MALLOC_MMAP_THRESHOLD_BYTES)
    return env


class DaskSchedulerProcess(SubprocessScheduler):
    """A ``SpecCluster`` scheduler spec class: a ``distributed.Scheduler`` in a child process.

    ``scheduler_kwargs`` go to the ``Scheduler`` (JSON values only: they travel on the command line).
    """

    def __init__(self, scheduler_kwargs: dict[str, Any] | None = None, timeout: int = START_TIMEOUT_S,
                 security: dict[str, Any] | None = None) -> None:
        """``security``: the keyword arguments of the ``distributed.security.Security`` the child listens and
        connects with (file names: they travel on its command line with the other options)."""
        super().__init__(scheduler_kwargs, timeout)
        # The base class learns the address from a scheduler file it polls; this one reads it from a pipe.
        self.scheduler_kwargs.pop("scheduler_file", None)
        if security:
            self.scheduler_kwargs[SECURITY_OPTION] = security

    async def _start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", CHILD_MODULE, json.dumps(self.scheduler_kwargs),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=child_env(dask.config.config),
        )
        assert self.process.stdout is not None
        try:
            line = await asyncio.wait_for(self.process.stdout.readline(), self.timeout)
        except TimeoutError:
            raise RuntimeError(f"the Dask scheduler process did not start within {self.timeout} s; "
                               "its output is in the gpu-scheduler's log") from None
        address = line.decode().strip()
        if not address:
            code = await self.process.wait()
            raise RuntimeError(f"the Dask scheduler process exited with code {code} at start-up; "
                               "its output is in the gpu-scheduler's log")
        self.address = address
        log.info("Dask scheduler process %d at %s", self.process.pid, address)


# --- the child ---------------------------------------------------------------------------------------


def _exit_with_parent(stdin_fd: int) -> None:
    """Block until the parent's end of stdin closes (it died), then end this process at once."""
    # The file descriptor, not sys.stdin: a daemon thread blocked in a buffered read holds its lock, which
    # makes the interpreter abort if the scheduler ends first (a start-up error).
    while os.read(stdin_fd, 1024):
        pass
    log.warning("the gpu-scheduler that started this Dask scheduler is gone: exiting")
    logging.shutdown()
    os._exit(0)


async def _serve(options: dict[str, Any], address_out: IO[str]) -> None:
    from distributed import Scheduler
    from distributed.security import Security

    if SECURITY_OPTION in options:
        options = {**options, SECURITY_OPTION: Security(**options[SECURITY_OPTION])}
    async with Scheduler(**options) as scheduler:
        address_out.write(scheduler.address + "\n")
        address_out.close()
        await scheduler.finished()


def main(argv: list[str]) -> int:
    """Run a Dask scheduler with the JSON keyword arguments ``argv[0]`` until it closes or the parent dies."""
    from distributed.compatibility import asyncio_run
    from distributed.config import get_loop_factory

    # Keep stdout for the address alone; anything else printed there goes to stderr (the log).
    address_out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    threading.Thread(target=_exit_with_parent, args=(sys.stdin.fileno(),), name="gpurt-parent-watch",
                     daemon=True).start()
    logging.getLogger("distributed").setLevel(DASK_LOG_LEVEL)
    asyncio_run(_serve(json.loads(argv[0]), address_out), loop_factory=get_loop_factory())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
