"""The image's compiled CPU kernels: the build step's refusals, and the copy each worker makes as it starts.

The build itself (a minute of compiling) runs where the image is composed as its Dockerfile builds it:
tests/test_composed_images.py, which also proves that the workers load what it compiled."""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernels.params import JobType
from kernels.warm import WARM_JOBS
from runtime.worker import kernel_cache
from runtime.worker.kernel_cache import NUMBA_CACHE_ENV, SEED_ENV


def _seed_folder(root: Path) -> Path:
    seed = root / "seed"
    (seed / "kernels_abc").mkdir(parents=True)
    (seed / "kernels_abc" / "european._cpu_blocks-86.nbi").write_bytes(b"index")
    (seed / "kernels_abc" / "european._cpu_blocks-86.py311.1.nbc").write_bytes(b"code")
    os.utime(seed / "kernels_abc" / "european._cpu_blocks-86.nbi", ns=(1_000_000_000, 1_000_000_000))
    return seed


def test_seed_copies_what_the_cache_lacks_with_its_time_stamps(tmp_path: Path, monkeypatch) -> None:
    seed, cache = _seed_folder(tmp_path), tmp_path / "cache"
    monkeypatch.setenv(SEED_ENV, str(seed))
    monkeypatch.setenv(NUMBA_CACHE_ENV, str(cache))

    assert kernel_cache.seed() == 2
    index = cache / "kernels_abc" / "european._cpu_blocks-86.nbi"
    assert index.read_bytes() == b"index" and index.stat().st_mtime_ns == 1_000_000_000
    assert sorted(p.name for p in (cache / "kernels_abc").iterdir()) == [  # no temporary file left behind
        "european._cpu_blocks-86.nbi", "european._cpu_blocks-86.py311.1.nbc"]


def test_seed_keeps_what_the_cache_already_holds(tmp_path: Path) -> None:
    seed, cache = _seed_folder(tmp_path), tmp_path / "cache"
    (cache / "kernels_abc").mkdir(parents=True)
    (cache / "kernels_abc" / "european._cpu_blocks-86.nbi").write_bytes(b"this worker's own")

    assert kernel_cache.seed(seed, cache) == 1
    assert (cache / "kernels_abc" / "european._cpu_blocks-86.nbi").read_bytes() == b"this worker's own"


def test_no_seed_or_no_cache_folder_copies_nothing(tmp_path: Path, monkeypatch) -> None:
    seed = _seed_folder(tmp_path)
    monkeypatch.delenv(SEED_ENV, raising=False)
    monkeypatch.setenv(NUMBA_CACHE_ENV, str(tmp_path / "cache"))
    assert kernel_cache.seed() == 0  # the local platform, a test: no image
    monkeypatch.setenv(SEED_ENV, str(seed))
    monkeypatch.delenv(NUMBA_CACHE_ENV)
    assert kernel_cache.seed() == 0  # numba caches beside the sources: nothing to copy into
    assert not (tmp_path / "cache").exists()


def test_a_seed_that_is_not_a_folder_is_a_warning_not_a_failure(tmp_path: Path, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger=kernel_cache.__name__):
        assert kernel_cache.seed(tmp_path / "missing", tmp_path / "cache") == 0
    assert f"{SEED_ENV}={tmp_path / 'missing'} is not a folder" in caplog.text


class _InProcessPool(ThreadPoolExecutor):
    """The build's process pool, run on threads here: what is handed to which process, without compiling."""

    def __init__(self, count: int, mp_context: object) -> None:
        super().__init__(count)
        POOLS.append(count)


POOLS: list[int] = []
CACHES: list[Path | None] = []


@pytest.fixture
def parts(monkeypatch) -> list[list[JobType]]:
    handed: list[list[JobType]] = []

    def compile_all_but_heston_greeks(job_types: list[JobType], cache: Path | None) -> list[str]:
        handed.append(job_types)
        CACHES.append(cache)
        return [name for name, job_type, _ in WARM_JOBS
                if job_type in job_types and name != "heston_option with Greeks"]

    POOLS.clear()
    CACHES.clear()
    monkeypatch.setattr(kernel_cache, "ProcessPoolExecutor", _InProcessPool)
    monkeypatch.setattr(kernel_cache, "_compile", compile_all_but_heston_greeks)
    return handed


def test_build_splits_the_job_types_over_the_processes_and_names_what_failed(tmp_path: Path, parts,
                                                                             capsys) -> None:
    seed = tmp_path / "seed"

    assert kernel_cache.main(["build", str(seed), "--processes", "3"]) == 1
    assert capsys.readouterr().err == ("error: could not compile the CPU kernels of: heston_option with Greeks "
                                       "(the log above says why)\n")
    assert POOLS == [3] and len(parts) == 3
    handed = [job_type for part in parts for job_type in part]
    assert sorted(handed) == sorted({job_type for _, job_type, _ in WARM_JOBS})  # each type to one process only
    assert seed.is_dir() and [seed] * 3 == CACHES  # each process caches there


@pytest.mark.parametrize("processes", [2, 3, 7])
def test_job_types_that_compile_a_kernel_in_common_go_to_one_process(tmp_path: Path, parts, processes: int) -> None:
    # two processes compiling basket._cpu_sums (the basket's and the American option's warm-ups) each
    # compiled it: some 13 CPU-seconds more in every image build and `make setup`
    kernel_cache.main(["build", str(tmp_path / "seed"), "--processes", str(processes)])

    assert len(parts) == processes
    assert any({JobType.BASKET_OPTION, JobType.AMERICAN_OPTION} <= set(part) for part in parts), parts


def test_build_without_a_folder_leaves_numbas_default_and_one_process_per_core(parts, monkeypatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    with pytest.raises(RuntimeError, match="heston_option with Greeks"):
        kernel_cache.build()
    assert POOLS == [2] and CACHES == [None, None]  # numba's default folder


@pytest.mark.parametrize(("arguments", "says"), [
    (["compile"], "invalid choice: 'compile'"),
    (["build", "--processes", "0"], "--processes must be at least 1"),
])
def test_the_build_command_refuses_bad_arguments_with_its_usage(arguments: list[str], says: str, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        kernel_cache.main(arguments)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m runtime.worker.kernel_cache") and says in err
