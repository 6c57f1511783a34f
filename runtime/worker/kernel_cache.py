"""The CPU twins compiled ahead of their first job: into the worker image at build time, handed to each worker
as it starts; and into a development checkout at ``make setup``.

A fresh worker compiles every kernel before its first kernel job (``runtime.worker.warm``): on the 2-core
development machine that is about 58 CPU-seconds for the CPU twins with an empty numba cache, against 3 s
loading them from a filled one. The image build fills one (``python -m runtime.worker.kernel_cache build
DIR``, run by ``docker/worker.Dockerfile``), and the warm-up preload copies it into the worker's own numba
cache (``NUMBA_CACHE_DIR``, a writable ``/tmp`` in the pod: numba refuses a cache folder it cannot write)
before it compiles anything: ``seed``. Where the image names no seed (``GPURT_KERNEL_CACHE_SEED`` unset: the
local platform, a test) or the worker has no cache folder of its own, nothing is copied and the warm-up
compiles as before. Without ``DIR``, ``build`` fills numba's default cache beside the kernels' sources, which
is what every process of a development checkout reads (``make setup``).

The compile is split by job type over processes of their own, one per core (numba compiles on one core, and
job types share few kernels; those that share one go to the same process), each writing its kernels into the
same cache, which numba allows: it writes a file under a temporary name and renames it into place.

numba keys each cached kernel by its source file's time stamp and by the CPU model and features it was
compiled for, and ignores an entry that does not match
(https://numba.readthedocs.io/en/0.62.0/developer/caching.html, "Cache sharing"): a worker on a node whose CPU
differs from the build machine's compiles its kernels at start, exactly as without a seed. Nothing here can
make a kernel wrong, only its first load faster. CUDA kernels are not compiled here: they compile for the
GPU in use, and the image is built on a machine without one.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import shutil
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Final

from kernels.params import JobType

# The image's seed folder (docker/worker.Dockerfile sets it); unset, there is none.
SEED_ENV: Final = "GPURT_KERNEL_CACHE_SEED"
# numba's cache folder (numba reads it once, as it is imported).
NUMBA_CACHE_ENV: Final = "NUMBA_CACHE_DIR"
# Job types whose warm-up jobs compile a kernel in common: handed to one process, or every process that gets
# one of them compiles that kernel again (an American option prices on the basket's paths: basket._cpu_sums,
# some 13 CPU-seconds of every build).
COMPILED_TOGETHER: Final[tuple[frozenset[JobType], ...]] = (
    frozenset({JobType.BASKET_OPTION, JobType.AMERICAN_OPTION}),
)

log = logging.getLogger(__name__)


def build(cache: Path | None = None, processes: int | None = None) -> list[str]:
    """Compile every warm-up job's CPU kernels into ``cache`` (a numba cache folder; None: numba's default,
    beside the sources), over ``processes`` processes (None: one per core); the warm-up jobs compiled.

    Each process is a fresh interpreter, which sets numba's cache folder before it imports numba: numba
    reads it once.
    Raises ``RuntimeError`` when a warm-up job fails: a build that leaves kernels to compile at every start
    must not pass silently.
    """
    from kernels.warm import WARM_JOBS

    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    units = _units(list(dict.fromkeys(job_type for _, job_type, _ in WARM_JOBS)))
    count = max(1, min(processes or os.cpu_count() or 1, len(units)))
    parts = [[job_type for unit in units[index::count] for job_type in unit] for index in range(count)]
    with ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("spawn")) as pool:
        compiled = [name for names in pool.map(_compile, parts, [cache] * count) for name in names]
    missing = [name for name, _, _ in WARM_JOBS if name not in compiled]
    if missing:
        raise RuntimeError(f"could not compile the CPU kernels of: {', '.join(missing)} (the log above says why)")
    return compiled


def _units(job_types: list[JobType]) -> list[list[JobType]]:
    """``job_types`` in order, those ``COMPILED_TOGETHER`` joined into the unit of the first of them: what one
    build process takes."""
    units: list[list[JobType]] = []
    for job_type in job_types:
        together = next((group for group in COMPILED_TOGETHER if job_type in group), frozenset())
        unit = next((unit for unit in units if unit[0] in together), None)
        if unit is None:
            units.append([job_type])
        else:
            unit.append(job_type)
    return units


def _compile(job_types: list[JobType], cache: Path | None) -> list[str]:
    """In a build process: run the warm-up jobs of ``job_types`` on the CPU, caching into ``cache``; the
    names of those that ran."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if cache is not None:  # before numba is imported (below, with the kernels): it reads the folder once
        os.environ[NUMBA_CACHE_ENV] = str(cache)
    from kernels.warm import warm_kernels

    return list(warm_kernels("cpu", job_types))


def seed(source: Path | None = None, cache: Path | None = None) -> int:
    """Copy the image's compiled kernels (``source``, default ``$GPURT_KERNEL_CACHE_SEED``) into this
    process's numba cache (``cache``, default ``$NUMBA_CACHE_DIR``); the number of files copied.

    A file already in the cache is kept: it is this worker's own, or another worker's copy of the same. Each
    file is written under a temporary name and renamed into place, so a worker sharing the folder (the local
    composition does) never reads half a file. Copies keep the seed's time stamps. Nothing to copy from or to
    is not an error: the warm-up then compiles, as without a seed.
    """
    source = source or _path_from(SEED_ENV)
    cache = cache or _path_from(NUMBA_CACHE_ENV)
    if source is None or cache is None:
        return 0
    if not source.is_dir():
        log.warning("%s=%s is not a folder: the kernels compile at start", SEED_ENV, source)
        return 0
    copied = 0
    for path in sorted(source.rglob("*")):
        target = cache / path.relative_to(source)
        if path.is_dir() or target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        os.close(handle)
        shutil.copy2(path, temporary)
        os.replace(temporary, target)
        copied += 1
    log.info("copied %d compiled kernel file(s) from %s into %s", copied, source, cache)
    return copied


def _path_from(variable: str) -> Path | None:
    value = os.environ.get(variable)
    return Path(value) if value else None


def main(argv: list[str] | None = None) -> int:
    """``python -m runtime.worker.kernel_cache build [DIR] [--processes N]``: the image build's step, and
    ``make setup``'s."""
    parser = argparse.ArgumentParser(prog="python -m runtime.worker.kernel_cache",
                                     description="Compile the kernels' CPU twins into a numba cache.")
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("build", help="compile every warm-up job's CPU kernels")
    command.add_argument("cache", nargs="?", type=Path, default=None,
                         help="numba cache folder to fill (default: numba's own, beside the kernels' sources)")
    command.add_argument("--processes", type=int, default=None,
                         help="compile in this many processes at once (default: one per core)")
    arguments = parser.parse_args(argv)
    if arguments.processes is not None and arguments.processes < 1:
        parser.error("--processes must be at least 1")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        compiled = build(arguments.cache, arguments.processes)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    where = arguments.cache or "numba's cache beside the kernels' sources"
    print(f"compiled the CPU kernels of {len(compiled)} warm-up jobs into {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
