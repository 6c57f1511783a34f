"""The CPU twins compiled into the worker image at build time, and handed to each worker as it starts.

A fresh worker compiles every kernel before its first kernel job (``runtime.worker.warm``): on the 2-core
development machine that is about 58 CPU-seconds for the CPU twins with an empty numba cache, against 3 s
loading them from a filled one. The image build fills one (``python -m runtime.worker.kernel_cache build
DIR``, run by ``docker/worker.Dockerfile``), and the warm-up preload copies it into the worker's own numba
cache (``NUMBA_CACHE_DIR``, a writable ``/tmp`` in the pod: numba refuses a cache folder it cannot write)
before it compiles anything: ``seed``. Where the image names no seed (``GPURT_KERNEL_CACHE_SEED`` unset: the
local platform, a test) or the worker has no cache folder of its own, nothing is copied and the warm-up
compiles as before.

numba keys each cached kernel by its source file's time stamp and by the CPU model and features it was
compiled for, and ignores an entry that does not match
(https://numba.readthedocs.io/en/0.62.0/developer/caching.html, "Cache sharing"): a worker on a node whose CPU
differs from the build machine's compiles its kernels at start, exactly as without a seed. Nothing here can
make a kernel wrong, only its first load faster. CUDA kernels are not in the seed: they compile for the GPU
in use, and the image is built on a machine without one.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Final

# The image's seed folder (docker/worker.Dockerfile sets it); unset, there is none.
SEED_ENV: Final = "GPURT_KERNEL_CACHE_SEED"
# numba's cache folder (numba reads it once, as it is imported).
NUMBA_CACHE_ENV: Final = "NUMBA_CACHE_DIR"

log = logging.getLogger(__name__)


def build(seed: Path) -> list[str]:
    """Compile every warm-up job's CPU kernels into ``seed`` (a numba cache folder); the jobs compiled.

    Runs in a process of its own (the image build's): numba reads its cache folder once, when it is first
    imported, so this sets it before importing any kernel. Raises ``RuntimeError`` when a warm-up job fails:
    an image that would compile at every start must not build silently.
    """
    if "numba" in sys.modules and os.environ.get(NUMBA_CACHE_ENV) != str(seed):
        raise RuntimeError(f"numba was imported before {NUMBA_CACHE_ENV} could be set to {seed}: "
                           "build the seed in a fresh process (python -m runtime.worker.kernel_cache build DIR)")
    seed.mkdir(parents=True, exist_ok=True)
    os.environ[NUMBA_CACHE_ENV] = str(seed)
    from kernels.warm import WARM_JOBS, warm_kernels

    compiled = warm_kernels("cpu")
    missing = [name for name, _, _ in WARM_JOBS if name not in compiled]
    if missing:
        raise RuntimeError(f"could not compile the CPU kernels of: {', '.join(missing)} (the log above says why)")
    return list(compiled)


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
    """``python -m runtime.worker.kernel_cache build DIR``: the image build's step."""
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 2 or arguments[0] != "build":
        print("usage: python -m runtime.worker.kernel_cache build DIR", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        compiled = build(Path(arguments[1]))
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"compiled the CPU kernels of {len(compiled)} warm-up jobs into {arguments[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
