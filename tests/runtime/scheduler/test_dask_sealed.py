"""Sealed tasks: the call survives pickling, and a worker that cannot import a task's function fails that task
and lives on (a real ``dask scheduler`` and ``dask worker`` whose environment lacks the function's module)."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.scheduler.backends.dask_sealed import seal, submit_sealed
from tests.runtime.scheduler.platform import wait_for

pytestmark = pytest.mark.integration
DASK = Path(sys.executable).with_name("dask")


def test_loading_the_seal_makes_the_call() -> None:
    assert pickle.loads(seal(divmod, 7, 2)) == (3, 1)
    assert pickle.loads(seal(int, "ff", base=16)) == 255  # keywords travel too


def test_a_seal_names_only_the_standard_library_until_it_is_loaded() -> None:
    blob = seal(divmod, 7, 2)
    # what Dask's scheduler and a worker unpickle to read the task: pickle.loads and bytes, nothing of ours
    assert b"runtime" not in pickle.dumps((pickle.loads, blob))[: -len(blob)]


@pytest.fixture
def probe_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A module this process can import and the Dask processes below cannot (it is on no path of theirs)."""
    name = f"gpurt_sealed_probe_{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "only-here"
    folder.mkdir()
    (folder / f"{name}.py").write_text(textwrap.dedent("""
        def plus_one(x):
            return x + 1
    """))
    monkeypatch.syspath_prepend(str(folder))
    module = __import__(name)
    yield module
    sys.modules.pop(name, None)


@pytest.fixture
def dask_cluster(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A Dask scheduler and one worker, as separate processes started from an empty folder."""
    scheduler_file = tmp_path / "scheduler.json"
    common = {"cwd": tmp_path, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "start_new_session": True}
    scheduler = subprocess.Popen([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                  "--scheduler-file", str(scheduler_file)], **common)  # type: ignore[call-overload]
    worker = None
    try:
        wait_for(lambda: scheduler_file.exists() and scheduler_file.stat().st_size > 0, 60, "the Dask scheduler")
        address = json.loads(scheduler_file.read_text())["address"]
        worker = subprocess.Popen([str(DASK), "worker", address, "--no-nanny", "--nthreads", "1",
                                   "--no-dashboard", "--host", "127.0.0.1"], **common)  # type: ignore[call-overload]
        yield address, worker
    finally:
        for process in (worker, scheduler):
            if process is not None:
                process.kill()
                process.wait(timeout=30)


def test_a_task_the_worker_cannot_import_fails_alone_and_the_worker_lives_on(
        probe_module: Any, dask_cluster: tuple[str, subprocess.Popen[bytes]]) -> None:
    from distributed import Client

    address, worker = dask_cluster
    with Client(address, timeout=60) as client:
        client.wait_for_workers(1, timeout=60)
        doomed = submit_sealed(client, probe_module.plus_one, 1, key="sealed-missing-module")
        with pytest.raises(ModuleNotFoundError, match=probe_module.__name__):
            doomed.result(timeout=60)
        assert worker.poll() is None  # an unsealed task of that module would have ended the worker's process
        assert submit_sealed(client, divmod, 7, 2, key="sealed-after").result(timeout=60) == (3, 1)
        assert len(client.scheduler_info()["workers"]) == 1
