"""The two images composed as their Dockerfiles build them, without Docker, and run as they are deployed.

Each image's environment is made the way its Dockerfile makes it: the folders its ``COPY`` lines name, with
``pyproject.toml`` and ``uv.lock``, installed by the same ``uv sync --frozen --no-dev --extra … --no-editable``
into a virtualenv outside the source tree (the image's ``/opt/gpurt``), then the Dockerfile's own build steps
(the worker image's compiled CPU kernels); every process starts in an empty folder, so nothing of the checkout
is importable. Then: the local broker (Pub/Sub), a Dask scheduler from the gpu-scheduler image, two
``dask worker``s from the gpu-worker image (the command and settings the DaskCluster manifest gives them,
warm-up preload included, one ``GPU`` unit each with the kernels' CPU twins), and the gpu-scheduler from its
image, pointed at that Dask cluster as an external one (``GPURT_POOLS=external``). A plain, a sharded, a packed,
a Heston-with-Greeks, an American and an invalid job each get the result they should.

This is what catches a function handed to Dask that the worker image does not carry, or a scheduler-side step
that needs a library only the worker image installs (docs/architecture.md, "Folders, images and layers").
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from runtime.local.broker import EmulatorHandle, start_emulator
from runtime.manifests.dask import worker_command
from runtime.manifests.dask_settings import dask_env
from runtime.protocol import contract
from runtime.protocol.messages import JobStatus
from runtime.worker.kernel_cache import SEED_ENV
from tests.runtime.scheduler.platform import Requests, ResultListener, create_topology, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "composed-images"
TOKEN = "composed-token"
SHARD_PATHS = 100_000
# The image's environment folder, which the tests put elsewhere.
IMAGE_ENV = "/opt/gpurt"
# A worker whose seed the build filled starts in seconds; one that must compile (a seed that does not load)
# takes minutes on a loaded machine.
START_TIMEOUT_S = 420.0
JOB_TIMEOUT_S = 300.0
# The jobs that hold every slot while the tiny jobs gather behind them run until the test cancels them.
HOLD_S = JOB_TIMEOUT_S


@dataclass(frozen=True)
class Image:
    """One Dockerfile's recipe: the project folders it copies and the extra it installs."""

    dockerfile: Path

    def copies(self) -> list[str]:
        """The project paths of its ``COPY <path> ./<path>`` lines (the build context's own files)."""
        found = re.findall(r"^COPY ([\w/.]+) \./([\w/.]+)$", self.dockerfile.read_text(), flags=re.MULTILINE)
        return [source for source, target in found if source == target]

    def sync_command(self) -> list[str]:
        """Its final ``uv sync`` (the one that installs the project), as arguments."""
        lines = re.findall(r"uv sync [^\n\\]*--no-editable", self.dockerfile.read_text())
        assert len(lines) == 1, f"{self.dockerfile.name}: expected one `uv sync ... --no-editable`, found {lines}"
        return lines[0].split()

    def python_steps(self) -> list[list[str]]:
        """Its ``RUN cd / && /opt/gpurt/bin/python -m …`` lines (the installed project run at build), as arguments."""
        found = re.findall(rf"^RUN cd / && ({IMAGE_ENV}/bin/python -m .+)$", self.dockerfile.read_text(),
                           flags=re.MULTILINE)
        return [line.split() for line in found]

    def env(self, name: str) -> str:
        """The value its ``ENV`` gives ``name``."""
        found = re.findall(rf"^\s*(?:ENV )?{name}=(\S+?)(?: \\)?$", self.dockerfile.read_text(), flags=re.MULTILINE)
        assert len(found) == 1, f"{self.dockerfile.name}: expected one {name}=, found {found}"
        return found[0]


def _uv() -> list[str]:
    """How to run uv: on PATH, else as a module of a Python that has it (the Makefile installs it with
    ``python3 -m pip`` where none is on PATH, so ``make test`` on a fresh machine has it there)."""
    found = shutil.which("uv")
    if found:
        return [found]
    for python in (sys.executable, shutil.which("python3")):
        if python and subprocess.run([python, "-m", "uv", "--version"], capture_output=True,
                                     timeout=60, check=False).returncode == 0:
            return [python, "-m", "uv"]
    pytest.fail("uv is needed to build the images' environments: `python3 -m pip install uv` (make setup does)")


def in_environment(argument: str, env: Path) -> str:
    """``argument`` of the Dockerfile with the image's ``/opt/gpurt`` put where the test made it (``env``)."""
    return argument.replace(IMAGE_ENV, str(env), 1) if argument.startswith(IMAGE_ENV) else argument


def build_environment(image: Image, where: Path) -> Path:
    """The image's virtualenv, made under ``where`` as its Dockerfile makes it; returns its ``bin`` folder."""
    source = where / "src"
    source.mkdir(parents=True)
    for name in ("pyproject.toml", "uv.lock", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for path in image.copies():
        target = source / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / path).is_dir():
            shutil.copytree(ROOT / path, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / path, target)
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(where / "env"), "UV_PYTHON_DOWNLOADS": "never"}
    env.pop("VIRTUAL_ENV", None)
    _, *arguments = image.sync_command()
    done = subprocess.run([*_uv(), *arguments, "--python", sys.executable], cwd=source, env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    shutil.rmtree(source)  # the environment holds its own copy (no editable install): nothing points back here
    for step in image.python_steps():
        done = subprocess.run([in_environment(argument, where / "env") for argument in step], cwd=where,
                              env=_clean_env(), capture_output=True, text=True, timeout=900, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return where / "env" / "bin"


SCHEDULER_IMAGE = Image(ROOT / "docker" / "scheduler.Dockerfile")
WORKER_IMAGE = Image(ROOT / "docker" / "worker.Dockerfile")


def test_the_recipes_are_read_from_the_dockerfiles() -> None:
    assert WORKER_IMAGE.copies() == ["runtime/__init__.py", "runtime/worker", "runtime/protocol", "kernels"]
    assert "runtime/scheduler" in SCHEDULER_IMAGE.copies()
    assert WORKER_IMAGE.sync_command()[-3:] == ["--extra", "gpu", "--no-editable"]
    seed = WORKER_IMAGE.env(SEED_ENV)
    assert WORKER_IMAGE.python_steps() == [[f"{IMAGE_ENV}/bin/python", "-m", "runtime.worker.kernel_cache", "build",
                                            seed]]
    assert seed.startswith(f"{IMAGE_ENV}/")  # inside the folder the runtime stage copies from the build stage
    assert SCHEDULER_IMAGE.python_steps() == []


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Composed:
    """The running composition: what a test talks to."""

    api: httpx.Client
    requests: Requests
    results: ResultListener
    dask_address: str
    logs: Path
    kernel_seed: Path
    numba_cache: Path


class _Processes:
    def __init__(self, logs: Path, cwd: Path) -> None:
        self._logs, self._cwd = logs, cwd
        self._started: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        with open(self._logs / f"{name}.log", "ab") as out:
            process = subprocess.Popen(command, cwd=self._cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        self._started.append(process)
        return process

    def stop(self) -> None:
        for process in reversed(self._started):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def _clean_env(**extra: str) -> dict[str, str]:
    """A process environment with nothing of the checkout or of the test's virtualenv on its paths."""
    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "LC_ALL", "TMPDIR", "USER")}
    return {**keep, "PATH": "/usr/bin:/bin", **extra}


@pytest.fixture(scope="module")
def composed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Composed]:
    base = tmp_path_factory.mktemp("composed")
    scheduler_bin = build_environment(SCHEDULER_IMAGE, base / "gpu-scheduler")
    worker_bin = build_environment(WORKER_IMAGE, base / "gpu-worker")
    empty, logs = base / "cwd", base / "logs"
    empty.mkdir()
    logs.mkdir()
    broker: EmulatorHandle = start_emulator("127.0.0.1", 0)
    processes = _Processes(logs, empty)
    try:
        create_topology(broker.address, PROJECT)
        dask_port = _free_port()
        dask_address = f"tcp://127.0.0.1:{dask_port}"
        processes.start("dask-scheduler", [str(scheduler_bin / "dask"), "scheduler", "--host", "127.0.0.1",
                                           "--port", str(dask_port), "--dashboard-address", ":0"],
                        _clean_env(**dask_env()))
        command = worker_command(1)
        command[command.index("--local-directory") + 1] = str(base / "scratch")
        kernel_seed = Path(in_environment(WORKER_IMAGE.env(SEED_ENV), worker_bin.parent))
        for number in (1, 2):  # one cache folder for both, as the pods' /tmp/numba (each copies the seed there)
            processes.start(f"dask-worker-{number}", [str(worker_bin / "dask"), *command[1:], dask_address],
                            _clean_env(**dask_env(), GPURT_DEVICE="cpu", NUMBA_CACHE_DIR=str(base / "numba"),
                                       **{SEED_ENV: str(kernel_seed)}))
        port = _free_port()
        processes.start("gpu-scheduler", [str(scheduler_bin / "python"), "-m", "runtime.scheduler"], _clean_env(
            PUBSUB_EMULATOR_HOST=broker.address, GPURT_PROJECT=PROJECT, GPURT_PORT=str(port),
            GPURT_CONTROL_TOKEN=TOKEN, GPURT_DASK_SCHEDULER=dask_address, GPURT_POOLS="external",
            GPURT_SHARD_PATHS=str(SHARD_PATHS), GPURT_DEVICE="cpu",
            GPURT_RESULT_STORE=(base / "results").as_uri()))
        api = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10,
                           headers={"Authorization": f"Bearer {TOKEN}"})

        def ready() -> bool:
            try:
                return api.get(contract.READY_PATH).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, START_TIMEOUT_S, f"the gpu-scheduler to be ready (logs in {logs})")
        # Ready means Pub/Sub and Dask are reached, not that both workers have joined: on a loaded machine the
        # second one's start (a fresh environment's imports) can outlast the first jobs, and the pack check needs
        # a slot per worker (a CI run once saw 1 slot there).
        wait_for(lambda: api.get("/status").json()["slots"] >= 2, START_TIMEOUT_S,
                 f"both Dask workers' slots (logs in {logs})")
        results, requests = ResultListener(broker.address, PROJECT), Requests(broker.address, PROJECT)
        yield Composed(api, requests, results, dask_address, logs, kernel_seed, base / "numba")
        requests.close()
        results.close()
        api.close()
    finally:
        processes.stop()
        broker.stop()


def _task_keys(dask_address: str, run: Callable[[], None]) -> list[str]:
    """The Dask keys of the tasks that ran while ``run()`` did (the Dask scheduler's own task stream)."""
    from distributed import Client, get_task_stream

    with Client(dask_address, timeout=60) as client, get_task_stream(client) as stream:
        run()
    return [str(task["key"]) for task in stream.data]


def _slots_held_by(api: httpx.Client, job_ids: set[str]) -> bool:
    status = api.get("/status").json()
    return len(job_ids & set(status["in_flight"])) >= status["slots"] > 0


def _taken(api: httpx.Client, job_ids: list[str]) -> int:
    """How many of ``job_ids`` the gpu-scheduler has taken: running, or finished with a stored result."""
    return sum(api.get(f"/jobs/{job_id}").status_code == httpx.codes.OK for job_id in job_ids)


def test_six_jobs_through_the_composed_images(composed: Composed) -> None:
    publish, results = composed.requests, composed.results
    waited: dict[str, object] = {}

    def run() -> None:
        publish.job("plain", "european_option", paths=200_000, seed=1)
        publish.job("sharded", "european_option", paths=1_000_000, seed=2)
        publish.job("heston", "heston_option", paths=20_000, steps=16, seed=3, greeks=["delta", "vega"])
        publish.job("american", "american_option", spots=[100], weights=[1], volatilities=[0.25], strike=100,
                    kind="put", steps=25, paths=20_000, regression_paths=10_000, seed=4)
        publish.raw({"job_id": "invalid", "type": "european_option", "params": {"volatility": -1}})
        for job_id in ["plain", "sharded", "heston", "american", "invalid"]:
            waited[job_id] = results.wait(job_id, timeout_s=JOB_TIMEOUT_S)
        # Tiny jobs run packed when they wait together for a slot. Jobs too long to pack hold every slot; each
        # slot takes one tiny job ahead (submitted behind its holder) and the others wait in the gpu-scheduler.
        # Once two wait, one holder is cancelled: its slot alone frees, and takes every waiting tiny job as one
        # task; then the other holders are cancelled. Letting the holders end on a timer instead raced the
        # slots: both freed at once, each took one waiting job, and no pack formed.
        slots = composed.api.get("/status").json()["slots"]
        assert slots >= 2, "one slot must stay held while another takes the tiny jobs"
        holders = [f"holder-{n}" for n in range(slots)]
        for job_id in holders:
            publish.job(job_id, "noop", sleep_s=HOLD_S)
        wait_for(lambda: _slots_held_by(composed.api, set(holders)), JOB_TIMEOUT_S, "the holders to take every slot")
        tiny = [f"tiny-{n}" for n in range(8)]
        for job_id in tiny:
            publish.job(job_id, "noop", sleep_s=0.01)
        wait_for(lambda: composed.api.get("/status").json()["waiting"] >= 2, JOB_TIMEOUT_S,
                 "two tiny jobs to wait for a slot")
        taken_ahead = _taken(composed.api, tiny)
        composed.api.delete(f"/jobs/{holders[0]}").raise_for_status()
        wait_for(lambda: _taken(composed.api, tiny) >= taken_ahead + 2, JOB_TIMEOUT_S,
                 "the freed slot to take the waiting tiny jobs")
        for job_id in holders[1:]:
            composed.api.delete(f"/jobs/{job_id}").raise_for_status()
        for job_id in [*holders, *tiny]:
            waited[job_id] = results.wait(job_id, timeout_s=JOB_TIMEOUT_S)

    keys = _task_keys(composed.dask_address, run)
    outcome = {job_id: result.status for job_id, result in waited.items()}  # type: ignore[attr-defined]
    expected = {job_id: JobStatus.CANCELLED if job_id.startswith("holder-") else JobStatus.SUCCEEDED
                for job_id in waited}
    assert outcome == {**expected, "invalid": JobStatus.REJECTED}, f"logs in {composed.logs}"

    sharded = waited["sharded"].result  # type: ignore[attr-defined]
    assert sharded["shards"] == 10 and sharded["paths"] >= 1_000_000  # merged on a worker from ten shards
    assert sum("-shard" in key for key in keys) >= 10 and any(key.endswith("-merge") for key in keys)
    plain = waited["plain"].result  # type: ignore[attr-defined]
    assert abs(plain["estimate"] - plain["closed_form"]) < 4 * plain["std_error"]  # Black-Scholes, independent
    assert set(waited["heston"].result["greeks"]) == {"delta", "vega"}  # type: ignore[attr-defined]
    assert waited["american"].result["estimate"] > 0  # type: ignore[attr-defined]
    assert "volatility" in waited["invalid"].error.message  # type: ignore[attr-defined]
    assert any("pack" in key for key in keys), keys  # at least one pack of tiny jobs ran as one task


def _indexes(folder: Path) -> dict[str, int]:
    """numba's cache indexes under ``folder``, with their modification times: numba rewrites a kernel's index
    when it compiles that kernel, and leaves it alone when it loads it."""
    return {str(path.relative_to(folder)): path.stat().st_mtime_ns for path in folder.rglob("*.nbi")}


def test_the_workers_load_the_kernels_the_image_build_compiled(composed: Composed) -> None:
    from distributed import Client

    from runtime.worker.warm import warm_seconds

    seeded = _indexes(composed.kernel_seed)
    with Client(composed.dask_address, timeout=60) as client:
        wait_for(lambda: all(client.run(warm_seconds).values()), JOB_TIMEOUT_S, "both workers to be warm")
    assert len(seeded) >= 10  # every kernel module's twins, built by the Dockerfile's step
    # Loaded, not compiled: every kernel the warm-up and the jobs above ran found its index as the build left it
    assert _indexes(composed.numba_cache) == seeded, f"logs in {composed.logs}"


def test_the_images_hold_only_what_their_dockerfiles_copy(composed: Composed) -> None:
    site = next((composed.logs.parent / "gpu-worker" / "env" / "lib").glob("python3*/site-packages"))
    assert (site / "runtime" / "worker").is_dir() and (site / "kernels").is_dir()
    assert not (site / "runtime" / "scheduler").exists() and not (site / "gpurt").exists()
    # the workers that ran every job above are the two that started with the composition
    workers = json.loads(composed.api.get("/pools").text)
    assert [(pool["id"], pool["workers"]) for pool in workers] == [("external", 2)]
