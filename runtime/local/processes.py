"""Background processes of the local platform: start with a log file, check, stop gracefully.

Each process leads its own session (process group), so a Ctrl-C in the terminal that ran ``gpurt local
up`` does not reach it, and stopping it also stops its children (the scheduler's Dask scheduler process
and workers) instead of leaving orphans behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

import psutil

from runtime.access.local_state import ProcessRecord, running_process
from runtime.access.local_state import is_alive as is_alive  # callers ask the process module

# How often to look at a stopping process; short, since shutdown is usually quick.
POLL_INTERVAL_S: Final = 0.1
LOG_TAIL_BYTES: Final = 4_000  # enough of a log to show why a process died at start-up
# Everything the platform writes is its user's alone: logs carry job ids and errors, the result store the
# users' risk figures, and the state file the control token. Folders 0700, files 0600, and every process
# it starts creates its own files (the result store, Prometheus' data) the same way.
PRIVATE_DIR_MODE: Final = 0o700
PRIVATE_FILE_MODE: Final = 0o600
PRIVATE_UMASK: Final = 0o077


def private_dir(path: Path) -> Path:
    """Make ``path`` and leave it readable by its owner only, even if it existed; parents it had to make too.

    ``mkdir(parents=True)`` gives the parents it makes the default mode, whatever ``mode`` says; parents that
    existed (the user's own folders) are left as they are.
    """
    missing = [folder for folder in (path, *path.parents) if not folder.exists()]
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    for folder in (path, *missing):
        folder.chmod(PRIVATE_DIR_MODE)
    return path


def write_private(path: Path, text: str) -> Path:
    """Write ``text`` to ``path``, readable by its owner only from the moment the file exists; returns ``path``."""
    private_file(path).write_text(text, encoding="utf-8")
    return path


def private_file(path: Path) -> Path:
    """Create ``path`` empty (or empty it) with mode 0600, for a writer that opens it by name: the mode stays."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)  # a file that existed keeps its mode through os.open
    finally:
        os.close(fd)
    return path


def start_process(name: str, command: Sequence[str], env: Mapping[str, str], log_path: Path,
                  cwd: Path | None = None) -> ProcessRecord:
    """Start ``command`` in its own session, stdout and stderr appended to ``log_path``.

    The log is private (0600, also when an earlier run left it readable), and the process runs with umask
    077, so whatever it creates is private too.
    """
    private_dir(log_path.parent)
    # Read and write: a process caps its own log by keeping its newest part (runtime.scheduler.logs.cap_file).
    fd = os.open(log_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE)
    os.fchmod(fd, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "ab") as log:
        proc = subprocess.Popen(
            list(command), env=dict(env), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=cwd, start_new_session=True, umask=PRIVATE_UMASK,
        )
    try:
        create_time = psutil.Process(proc.pid).create_time()
    except psutil.NoSuchProcess:
        create_time = 0.0  # died at once; is_alive reports it and the caller shows the log
    return ProcessRecord(name=name, pid=proc.pid, create_time=create_time, log_path=log_path, command=list(command))


def stop_process(record: ProcessRecord, grace_s: float) -> bool:
    """SIGTERM the process of ``record``, then what is left of its group; SIGKILL the group after ``grace_s``.
    True if it had to be killed.

    The leader goes first, alone: a gpu-scheduler stops its own Dask workers as it shuts down, and a worker
    signalled from outside while the scheduler still runs is one its nanny sees die and starts again (a fresh
    interpreter importing Dask and numba, only to be stopped a moment later).
    """
    proc = running_process(record)
    if proc is None:
        return False
    # The group outlives its leader when a child ignores SIGTERM: collect the members first.
    members = [proc, *_children(proc)]
    deadline = time.monotonic() + grace_s
    with contextlib.suppress(psutil.NoSuchProcess):
        proc.terminate()
    psutil.wait_procs([proc], timeout=grace_s)
    _signal_group(record.pid, signal.SIGTERM)
    _, alive = psutil.wait_procs(members, timeout=max(0.0, deadline - time.monotonic()))
    if not alive:
        _reap(record.pid)
        return False
    _signal_group(record.pid, signal.SIGKILL)
    for member in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    psutil.wait_procs(alive, timeout=grace_s)
    _reap(record.pid)
    return True


def kill_process(record: ProcessRecord, timeout_s: float) -> None:
    """SIGKILL the process group of ``record`` at once: a crash, with no chance to clean up (drills)."""
    proc = running_process(record)
    if proc is None:
        return
    members = [proc, *_children(proc)]
    _signal_group(record.pid, signal.SIGKILL)
    psutil.wait_procs(members, timeout=timeout_s)
    _reap(record.pid)


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _reap(pid: int) -> None:
    # When this process started the child (tests, the demo), collect its exit status so no zombie stays.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def log_tail(path: Path, limit: int = LOG_TAIL_BYTES) -> str:
    """The last ``limit`` bytes of a log, for an error message."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - limit))
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def free_ports(host: str, count: int) -> list[int]:
    """``count`` distinct TCP ports free on ``host`` right now (the caller binds them soon after).

    All the sockets stay open until every port is chosen: closed one at a time, the kernel may hand
    out the same port twice.
    """
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for sock in sockets:
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def port_in_use(host: str, port: int) -> bool:
    """Whether something accepts connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def wait_until(predicate: Callable[[], bool], timeout_s: float, interval_s: float = POLL_INTERVAL_S) -> bool:
    """Poll ``predicate`` until it is true or ``timeout_s`` passes; returns its last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)
