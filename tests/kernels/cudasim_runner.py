"""Runs jobs on the CUDA simulator and prints their summaries as JSON (started by test_cudasim.py).

``NUMBA_ENABLE_CUDASIM=1`` must be set before numba.cuda is first imported, hence a separate process.
Input (argv[1]): a JSON list of ``[job_type, params, gpu_chunk_blocks_or_null]``; argv[2], optional: a ``.npy``
file holding ``random_walk.jump_table()`` as the parent computed it.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import warnings
from types import ModuleType


def main() -> None:
    """Run every job of argv[1] with device ``gpu`` (the simulator) and print the summaries."""
    warnings.simplefilter("ignore")  # numba's simulator warns about object-mode fallbacks it makes itself
    import numpy as np

    prepare()
    from kernels import asian, european, fd_greeks, random_walk
    from tests.kernels.job_input import run_raw

    if len(sys.argv) > 2:
        # The random walk's jump table is host code, the same for every seed: here it runs as Python (some
        # 25 s, object mode or not), compiled in the parent it takes milliseconds.
        table = np.load(sys.argv[2])
        random_walk.jump_table = lambda: table

    summaries = []
    for job, params, chunk in json.loads(sys.argv[1]):
        if chunk is not None:
            european.KERNEL = dataclasses.replace(european.KERNEL, gpu_chunk_blocks=chunk)
            asian.GPU_CHUNK_PATH_STEPS = asian.PATHS_PER_BLOCK * params.get("steps", 1) * chunk
            random_walk.GPU_CHUNK_PATH_STEPS = random_walk.PATHS_PER_BLOCK * params.get("steps", 1) * chunk
            fd_greeks.GPU_CHUNK_ASSET_STEPS = chunk  # at least one block of paths per chunk
        out = run_raw(job, params, device="gpu")
        summaries.append({"device": out.device, **out.summary})
    print(json.dumps(summaries))


def prepare() -> None:
    """What a child does before it runs kernels on the simulator (this one, and test_shards_cudasim.py's): the
    random generator's and the random walk's object-mode functions as Python, every kernel's warm-up skipped."""
    from numba.cuda import random

    _object_mode_as_python(random)  # before the kernels import the generator's functions by name
    from kernels import random_walk

    _object_mode_as_python(random_walk)
    _without_warm_up()


def _object_mode_as_python(module: ModuleType) -> None:
    """``module``'s object-mode ``jit`` functions replaced by the Python functions they compile.

    Under the simulator numba's xoroshiro128+ functions (``numba.cuda.random``) are object-mode (``forceobj``),
    and so are random_walk's host functions that call them: object mode runs them with Python's semantics,
    after compiling each for each argument signature on its first call (some 7 s of the first random walk's
    9, measured, while the simulated threads of its block wait on the one compile). numba's generator code
    casts every step so that it runs the same as Python in the simulator (its comment in
    ``numba/cuda/random.py``); its functions call each other through the module's globals, so replacing those
    replaces every call.
    """
    from numba.core.dispatcher import Dispatcher

    for name, value in list(vars(module).items()):
        if isinstance(value, Dispatcher) and value.targetoptions.get("forceobj"):
            setattr(module, name, value.py_func)


def _without_warm_up() -> None:
    """Every kernel module's ``warm_up`` made a no-op (the clock still told the warm-up happened).

    The warm-up runs block 0 once more and throws it away, so that a real device's compile is not timed as
    kernel time; nothing of it reaches a summary, and the block it runs is the job's own first block, which
    the job then runs as it always does. On the simulator it makes each kernel's first job run its first block
    twice, most of these tiny jobs' work: the summaries are the same without it (timings aside), and the
    child's CPU some 11 s less of 43 (measured on the loaded 2-core machine, where the simulator's threads
    make it noisy)."""
    import importlib
    import pkgutil
    import time

    import kernels
    from kernels import chunks
    from kernels.context import RunContext

    def no_warm_up(compute: object, ctx: RunContext, key: object = None) -> None:
        ctx.clock.warmed(time.perf_counter())

    # chunks' own warm_up is one of those replaced: compared with it as it was, or the modules after chunks in
    # the listing (fd_greeks, launch, portfolio_var) would keep theirs
    warm_up = chunks.warm_up
    for module in pkgutil.iter_modules(kernels.__path__):
        imported = importlib.import_module(f"kernels.{module.name}")
        if getattr(imported, "warm_up", None) is warm_up:
            imported.warm_up = no_warm_up  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
