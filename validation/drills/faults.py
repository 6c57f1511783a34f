"""The faults of the chaos drill, each injected into the running local platform and then repaired.

Each returns a ``Fault``: when it struck, when the platform was whole again (repaired, every replica
ready, the pool at full size, intake open), and which jobs were running when it struck, so the drill
can tell how long those took to get their results.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlparse

import httpx
import psutil

from runtime.access.control_api import ApiClient, ApiError
from runtime.access.local_state import ProcessRecord
from runtime.protocol import contract
from validation.drills.base import DrillContext, DrillFailed, wait_for

# How long intake stays drained, and the store fails in the short store fault (seconds), at real time: a
# store outage costs no delivery attempt (docs/scheduler.md#store-outages), so neither hold is bound to
# the emulator's scaled retry backoff.
DRAIN_HOLD_S: Final = 3.0
STORE_FAULT_S: Final = 3.0
# A Dask worker process of a LocalCluster: multiprocessing's spawn entry point in the scheduler's children.
_WORKER_MARK: Final = "spawn_main"
STORE_FAULT: Final = "result store fails"
LONG_STORE_OUTAGE: Final = "long result store outage"
LONG_STORE_OUTAGE_FIGURE: Final = "long store outage_s"  # the drill's figure: how long it lasted
# During a store outage, how often the drill looks at the replicas' readiness (seconds).
OUTAGE_LOOK_S: Final = 5.0
READY_LOOK_TIMEOUT_S: Final = 5.0  # one /readyz asked without the token, during a store outage
# Folders of the result store (runtime/scheduler/store) that writes go to.
_STORE_FOLDERS: Final = ("results", "published", "artifacts", "cancel")


@dataclass
class Fault:
    """One fault as it happened."""

    name: str
    detail: str = ""
    struck_at: float = 0.0  # time.monotonic()
    whole_at: float = 0.0
    caught: list[str] = field(default_factory=list)  # jobs in flight (any replica) when it struck
    holding: set[str] = field(default_factory=set)  # the replicas those jobs were running on
    skipped: str | None = None  # why the fault could not be injected here
    problems: list[str] = field(default_factory=list)  # what the fault itself found wrong; fails the drill


def replica_apis(ctx: DrillContext, timeout_s: float = 5.0) -> dict[str, ApiClient]:
    """An API client per scheduler replica recorded in the state (a dead one answers with ApiError)."""
    state = ctx.platform.state
    if state is None:
        raise DrillFailed("the local platform's state is gone")
    return {r.name: ApiClient(r.api_url or "", state.control_token, timeout_s=timeout_s) for r in state.schedulers()}


def in_flight_by_replica(ctx: DrillContext) -> dict[str, list[str]]:
    """Job ids running on each live replica now (a replica running none, or not answering, is left out)."""
    running: dict[str, list[str]] = {}
    for name, api in replica_apis(ctx).items():
        with api, contextlib.suppress(ApiError):
            found = api.status().get("in_flight", [])
            if isinstance(found, list) and found:
                running[name] = found
    return running


def jobs_in_flight(ctx: DrillContext) -> list[str]:
    """Job ids running on any live replica now."""
    return _all_jobs(in_flight_by_replica(ctx))


def _all_jobs(running: dict[str, list[str]]) -> list[str]:
    return [job for jobs in running.values() for job in jobs]


def strike(ctx: DrillContext, name: str) -> Fault:
    running = in_flight_by_replica(ctx)
    fault = Fault(name, caught=_all_jobs(running), holding=set(running))
    fault.struck_at = time.monotonic()
    return fault


def target_replica(ctx: DrillContext) -> ProcessRecord:
    """The replica the faults hit: the last one, so the first (the CLI's default target) stays up."""
    state = ctx.platform.running_state()
    return state.schedulers()[-1]


# --- a Dask worker dies ---------------------------------------------------------------------------


def _workers_of(record: ProcessRecord) -> list[psutil.Process]:
    try:
        children = psutil.Process(record.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        with contextlib.suppress(psutil.Error):
            if any(_WORKER_MARK in part for part in child.cmdline()):
                found.append(child)
    return found


def _pool_full(api: ApiClient) -> bool:
    with contextlib.suppress(ApiError):
        pools = api.pools()
        return bool(pools) and all(p.workers >= (p.desired or 0) for p in pools)
    return False


def kill_worker(ctx: DrillContext) -> Fault:
    """SIGKILL one Dask worker process of the last replica; its nanny starts a new one."""
    record = target_replica(ctx)
    workers = _workers_of(record)
    if not workers:
        return Fault("Dask worker killed", skipped=f"no Dask worker process found under {record.name}")
    victim = workers[0]
    fault = strike(ctx, "Dask worker killed")
    os.kill(victim.pid, signal.SIGKILL)
    fault.detail = f"SIGKILL to worker pid {victim.pid} of {record.name}"
    with ApiClient(record.api_url or "", ctx.state.control_token, timeout_s=5.0) as api:
        def replaced() -> bool:
            pids = {w.pid for w in _workers_of(record)}
            return victim.pid not in pids and len(pids) >= len(workers) and _pool_full(api)

        wait_for(replaced, ctx.timeout_s, f"{record.name}'s pool to replace the killed worker")
    fault.whole_at = time.monotonic()
    return fault


# --- a scheduler replica crashes --------------------------------------------------------------------


def kill_replica(ctx: DrillContext) -> Fault:
    """SIGKILL the last scheduler replica (and its workers), then start it again."""
    record = target_replica(ctx)
    fault = strike(ctx, "scheduler replica killed")
    pid = ctx.platform.kill_scheduler(record.name)
    restarted = ctx.platform.restart_scheduler(on_step=ctx.on_step, names=[record.name])
    fault.whole_at = time.monotonic()
    fault.detail = (f"SIGKILL to {record.name} (pid {pid}) and its workers; back as pid {restarted[0].new_pid} "
                    f"{fault.whole_at - fault.struck_at:.1f}s later")
    return fault


# --- intake drained and resumed -------------------------------------------------------------------


def drain_intake(ctx: DrillContext) -> Fault:
    """Put every replica in drain mode for ``DRAIN_HOLD_S``, then back to normal."""
    fault = strike(ctx, "intake drained and resumed")
    apis = replica_apis(ctx)
    try:
        for api in apis.values():
            api.set_maintenance("drain")
        time.sleep(DRAIN_HOLD_S)  # the fault's own duration, not a wait for a condition
        left = len(jobs_in_flight(ctx))
        for api in apis.values():
            api.set_maintenance("normal")
    finally:
        for api in apis.values():
            api.close()
    fault.whole_at = time.monotonic()
    fault.detail = f"{len(apis)} replica(s) drained for {DRAIN_HOLD_S:.0f}s ({left} job(s) still finishing)"
    return fault


# --- the result store fails -----------------------------------------------------------------------


def store_folder(url: str) -> Path | None:
    """The local folder of a ``file://`` result store; None for any other store."""
    parsed = urlparse(url)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


def _writable(folder: Path) -> bool:
    probe = folder / f".chaos-probe-{uuid.uuid4().hex}"
    try:
        probe.write_bytes(b"")
    except OSError:
        return False
    probe.unlink()
    return True


def _chattr(flag: str, path: Path) -> bool:
    """``chattr FLAG PATH``; False where it fails or is not installed."""
    try:
        return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0
    except OSError:
        return False


@contextlib.contextmanager
def read_only(folders: list[Path]) -> Iterator[str | None]:
    """Make ``folders`` refuse new files for the block; yields how, or None if writes still succeed.

    Clearing the write bits is enough for an ordinary user. Root ignores them, so as root the folders
    are also marked immutable (``chattr +i``, which needs CAP_LINUX_IMMUTABLE: a container's root often
    lacks it). The folders are restored whatever happens.
    """
    modes = {folder: stat.S_IMODE(folder.stat().st_mode) for folder in folders}
    immutable: list[Path] = []
    try:
        for folder, mode in modes.items():
            folder.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        how = "made read-only (write permission removed)"
        if _writable(folders[0]):
            immutable = [folder for folder in folders if _chattr("+i", folder)]
            how = "made read-only (write permission removed, and chattr +i: root ignores permissions)"
        yield None if _writable(folders[0]) else how
    finally:
        for folder in immutable:
            _chattr("-i", folder)
        for folder, mode in modes.items():
            folder.chmod(mode)


@contextlib.contextmanager
def replaced_by_a_file(root: Path) -> Iterator[str]:
    """Move the store folder aside and put an empty file in its place for the block, then move it back.

    Every read and write under it then fails (not a directory): the store is down rather than read-only,
    for a root that neither permissions nor ``chattr`` can stop.
    """
    aside = root.with_name(f"{root.name}.chaos-aside")
    root.rename(aside)
    try:
        root.write_bytes(b"")
        yield "unavailable (its folder replaced by a file: as root, neither permissions nor chattr +i stop writes)"
    finally:
        root.unlink(missing_ok=True)
        aside.rename(root)


@contextlib.contextmanager
def failing_store(root: Path) -> Iterator[str]:
    """Make the local store at ``root`` fail to store results for the block; yields how it was done."""
    folders = [root, *(root / name for name in _STORE_FOLDERS if (root / name).is_dir())]
    with read_only(folders) as how:
        if how is not None:
            yield how
            return
    with replaced_by_a_file(root) as how:
        yield how


def store_fails(ctx: DrillContext) -> Fault:
    """Make the file result store read-only (else unavailable) for ``STORE_FAULT_S``: intake stops, none nacked."""
    return _store_outage(ctx, STORE_FAULT, STORE_FAULT_S)


def long_store_outage(ctx: DrillContext) -> Fault:
    """The same for ``ctx.store_outage_s`` (5 minutes by default), at real time; notes how the replicas answered."""
    ctx.figures[LONG_STORE_OUTAGE_FIGURE] = ctx.store_outage_s
    return _store_outage(ctx, LONG_STORE_OUTAGE, ctx.store_outage_s, watch=True)


def _store_outage(ctx: DrillContext, name: str, hold_s: float, watch: bool = False) -> Fault:
    folder = store_folder(ctx.state.result_store)
    if folder is None:
        return Fault(name, skipped=f"the result store {ctx.state.result_store} is not a local folder")
    stopped: set[str] = set()
    told: set[str] = set()
    with failing_store(folder) as how:
        fault = strike(ctx, name)
        until = fault.struck_at + hold_s
        while (left := until - time.monotonic()) > 0:
            # The fault's own duration; meanwhile, which replicas stopped intake for it, and which told a caller
            # without the token why (the store's path, a job id: issue 43).
            time.sleep(min(left, OUTAGE_LOOK_S))
            told |= _readiness_told_anyone(ctx)
            if watch:
                stopped |= _stopped_for_the_store(ctx)
    fault.whole_at = time.monotonic()
    if told:
        fault.problems.append(f"{name}: /readyz gave its reasons to a caller without the token on {sorted(told)}")
    fault.detail = f"{folder.name} {how} for {hold_s:.0f}s"
    if watch:
        # Only a replica with a result to write finds the store gone (docs/scheduler.md#store-outages): one
        # that held no job when it struck may rightly keep intake open, so the judgement is on the holders.
        fault.detail += (f"; {len(stopped)} replica(s) stopped intake for it (not ready), "
                         f"{len(fault.holding)} held jobs when it struck")
        if kept_open := sorted(fault.holding - stopped):
            fault.problems.append(f"{name}: {kept_open} held jobs when the store failed and never stopped intake")
    return fault


def _readiness_told_anyone(ctx: DrillContext) -> set[str]:
    """Replicas whose ``/readyz``, asked without the token, says more than whether they are ready."""
    told = set()
    for record in ctx.state.schedulers():
        with contextlib.suppress(httpx.HTTPError, ValueError):
            body = httpx.get(f"{record.api_url}{contract.READY_PATH}", timeout=READY_LOOK_TIMEOUT_S).json()
            if set(body) - {"ready"}:
                told.add(record.name)
    return told


def _stopped_for_the_store(ctx: DrillContext) -> set[str]:
    """Replicas whose status says the result store is unavailable (their intake stopped for it)."""
    found = set()
    for name, api in replica_apis(ctx).items():
        with api, contextlib.suppress(ApiError):
            if api.status().get("result_store_available") is False:
                found.add(name)
    return found
