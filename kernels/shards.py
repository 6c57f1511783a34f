"""Sharded jobs: one large job split by random-stream block range into shards that run apart and merge exactly.

Every kernel draws its random numbers by path block (``kernels.philox``), so blocks ``a .. b`` give the
same numbers whichever process computes them. Shard ``i`` of ``n`` is the block range
``[i B / n, (i + 1) B / n)`` of the job's ``B`` blocks and hands back what the job's figures are computed
from: the option kernels' five running sums (``kernels.estimators``), VaR's largest losses
(``portfolio_var.LossTail``). ``merge`` adds them in block order and computes the estimate and its
standard error once, so the result does not depend on the number of shards or of workers (beyond
float64 rounding of the sums' addition; VaR and CVaR are bit-for-bit the same).

Only what merges exactly is sharded: european and asian options without Greeks, portfolio VaR. Greeks
take a second pass over the same paths, and regressions (Longstaff-Schwartz) or Heston/basket/book jobs
stay one task. This module imports no kernel (and so no numba) until a shard runs or merges, so the
scheduler can plan shards without loading them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kernels.context import RunContext
from kernels.descriptors import descriptor_of
from kernels.jobs import JobOutput, expect_params, failures_of_the_job, job_output
from kernels.params import JobParams, JobType
from kernels.registry import sharded_module


@dataclass(frozen=True)
class ShardOutput:
    """One shard's part of a job, and how it ran. ``part`` is the kernel's mergeable partial result."""

    index: int
    shards: int
    first_block: int
    blocks: int
    part: Any  # np.ndarray (five sums) or portfolio_var.LossTail
    device: str
    elapsed_s: float
    load_s: float
    worker: str = ""  # set by whatever ran it (a Dask worker's address)


def shard_count(kind: JobType, params: JobParams, shard_paths: int | None) -> int:
    """How many shards the job runs as: 1 (as one task) unless it is shardable and over ``shard_paths`` paths
    (its type's size rule, ``kernels.sizes.SizeRule.shard_count``).

    ``params`` are ``kind``'s validated params, as for ``kernels.jobs.run_job``.
    """
    expect_params(kind, params)
    return descriptor_of(kind).size.shard_count(params, shard_paths)


def block_range(n_blocks: int, index: int, shards: int) -> tuple[int, int]:
    """The first block and block count of shard ``index`` of ``shards`` over ``n_blocks`` blocks."""
    if not 0 <= index < shards:
        raise ValueError(f"shard {index} of {shards} does not exist")
    first = index * n_blocks // shards
    return first, (index + 1) * n_blocks // shards - first


def run_shard(
    kind: JobType,
    params: JobParams,
    index: int,
    shards: int,
    *,
    device: str = "auto",
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[float], None] | None = None,
    chunk_scale: float = 1.0,
) -> ShardOutput:
    """Run shard ``index`` of ``shards`` of the job; cooperative cancel and progress as ``run_job``'s.

    ``chunk_scale`` (0..1] launches smaller chunks than the kernel's usual, for a shard run again after a
    transient failure or a timeout; the shard's part is the same whatever it is.
    """
    from kernels.device import resolve_device

    expect_params(kind, params)
    ctx = RunContext(should_stop=should_stop or (lambda: False), progress=progress or (lambda _: None),
                     chunk_scale=chunk_scale)
    started = time.perf_counter()
    used = resolve_device(device)
    module = sharded_module(kind)
    # a job of fewer blocks than shards leaves some shards empty (count 0): they add nothing to the merge
    first, count = block_range(module.block_count(params), index, shards)
    with failures_of_the_job(kind):
        part = module.shard_part(params, used, ctx, first, count)
    ctx.progress(1.0)
    elapsed = time.perf_counter() - started
    load_s = ctx.clock.load_s(started) if ctx.clock.warm_at is not None else 0.0
    return ShardOutput(index, shards, first, count, part, used, elapsed, load_s)


def merge(kind: JobType, params: JobParams, outputs: Sequence[ShardOutput], *, elapsed_s: float) -> JobOutput:
    """The job's output from all its shards' (any order): the same figures as the job run as one task.

    ``elapsed_s`` is the job's wall time (the shards ran side by side); its load time is the slowest
    shard's, and the summary says how many shards and distinct workers ran it.
    """
    expect_params(kind, params)
    ordered = sorted(outputs, key=lambda o: o.index)
    if not ordered or [o.index for o in ordered] != list(range(ordered[0].shards)):
        raise ValueError(f"shards {[o.index for o in ordered]} are not all of the job's")
    result = sharded_module(kind).merge_parts(params, [o.part for o in ordered])
    load_s = min(max(o.load_s for o in ordered), elapsed_s)
    workers = len({o.worker for o in ordered if o.worker}) or 1
    return job_output(params, result, ordered[0].device, elapsed_s=elapsed_s, load_s=load_s,
                      shards=len(ordered), workers=workers)
