"""The image's compiled CPU kernels: the build step's refusals, and the copy each worker makes as it starts.

The build itself (a minute of compiling) runs where the image is composed as its Dockerfile builds it:
tests/test_composed_images.py, which also proves that the workers load what it compiled."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

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


def test_build_refuses_a_process_whose_numba_reads_another_cache(tmp_path: Path, monkeypatch) -> None:
    import numba  # noqa: F401  (imported, as in any process that ran a kernel before)

    monkeypatch.delenv(NUMBA_CACHE_ENV, raising=False)
    with pytest.raises(RuntimeError, match="numba was imported before NUMBA_CACHE_DIR could be set"):
        kernel_cache.build(tmp_path / "seed")


def test_build_fails_naming_each_kernel_it_could_not_compile(tmp_path: Path, monkeypatch, capsys) -> None:
    from kernels import warm

    seed = tmp_path / "seed"
    monkeypatch.setenv(NUMBA_CACHE_ENV, str(seed))  # as if this process had been started for the build
    compiled = {name: 1.0 for name, _, _ in warm.WARM_JOBS if name != "heston_option with Greeks"}
    monkeypatch.setattr(warm, "warm_kernels", lambda device: compiled if device == "cpu" else {})

    assert kernel_cache.main(["build", str(seed)]) == 1
    assert capsys.readouterr().err == ("error: could not compile the CPU kernels of: heston_option with Greeks "
                                       "(the log above says why)\n")


def test_the_build_command_says_how_to_call_it(capsys) -> None:
    assert kernel_cache.main(["compile"]) == 2
    assert capsys.readouterr().err == "usage: python -m runtime.worker.kernel_cache build DIR\n"
