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


def main() -> None:
    """Run every job of argv[1] with device ``gpu`` (the simulator) and print the summaries."""
    warnings.simplefilter("ignore")  # numba's simulator warns about object-mode fallbacks it makes itself
    import numpy as np

    from kernels import asian, european, fd_greeks, random_walk
    from tests.kernels.job_input import run_raw

    if len(sys.argv) > 2:
        # The random walk's jump table is host code, the same for every seed: under the simulator numba runs
        # it in object mode (some 25 s), compiled in the parent it takes milliseconds.
        table = np.load(sys.argv[2])
        random_walk.jump_table = lambda: table

    _without_warm_up()
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


def _without_warm_up() -> None:
    """Every kernel module's ``warm_up`` made a no-op (the clock still told the warm-up happened).

    The warm-up runs block 0 once more and throws it away, so that a real device's compile is not timed as
    kernel time; nothing of it reaches a summary, and the block it runs is the job's own first block, which
    the job then runs as it always does. On the simulator it makes each kernel's first job run its first block
    twice, most of these tiny jobs' work: the summaries are the same without it (timings aside), and the
    child's CPU some 5 to 15 s less of 50 to 60 (measured on the loaded 2-core machine, where the simulator's
    threads make it noisy)."""
    import importlib
    import pkgutil
    import time

    import kernels
    from kernels import chunks
    from kernels.context import RunContext

    def no_warm_up(compute: object, ctx: RunContext, key: object = None) -> None:
        ctx.clock.warmed(time.perf_counter())

    for module in pkgutil.iter_modules(kernels.__path__):
        imported = importlib.import_module(f"kernels.{module.name}")
        if getattr(imported, "warm_up", None) is chunks.warm_up:
            imported.warm_up = no_warm_up  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
