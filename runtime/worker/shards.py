"""What a Dask worker runs for a sharded job: one shard, and the merge of all of them.

The gpu-scheduler plans the shards and waits for them (``runtime.scheduler.backends.shards``), but never opens
a shard's part: a part is a kernel's partial result (running sums, a VaR loss tail), and reading one would
import the kernel module, hence numba, which the gpu-scheduler image does not install. So a shard hands back
a ``SealedShard``: the figures the scheduler needs to spot stragglers, and the part as opaque bytes; the
merge runs as one more task on a worker, which has the kernels.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass, replace
from typing import Final

from kernels.params import JobParams, JobType

# How often a shard reports its progress (seconds): each report is one message to the Dask scheduler.
PROGRESS_PERIOD_S: Final = 1.0


@dataclass(frozen=True)
class SealedShard:
    """One finished shard as the gpu-scheduler sees it; ``payload`` is a pickled ``kernels.shards.ShardOutput``."""

    index: int
    elapsed_s: float  # the shard's own run time on its worker
    payload: bytes


def execute_shard(job_type: JobType, params: JobParams, index: int, shards: int, device: str, stop_events: list[str],
                  topic: str, attempt: int) -> SealedShard:
    """Run attempt ``attempt`` of shard ``index`` of ``shards`` on this worker, with ``1 / 2**attempt`` of the
    kernel's usual chunk; it stops when any of ``stop_events`` is set; progress goes to the Dask event ``topic``."""
    from distributed import get_worker

    from kernels.shards import run_shard
    from runtime.worker.task import stop_poller
    from runtime.worker.warm import wait_warm

    worker = get_worker()
    last = 0.0

    def progress(fraction: float) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= PROGRESS_PERIOD_S or fraction >= 1.0:
            last = now
            worker.log_event(topic, {"shard": index, "attempt": attempt, "done": fraction})

    should_stop = stop_poller(*stop_events)
    wait_warm(should_stop)  # a fresh worker compiles its kernels first (runtime.worker.warm)
    progress(0.0)  # says the attempt began on a worker: a straggler is timed from here
    out = run_shard(job_type, params, index, shards, device=device, should_stop=should_stop,
                    progress=progress, chunk_scale=0.5 ** attempt)
    out = replace(out, worker=worker.address)
    return SealedShard(index, out.elapsed_s, pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))


def merge_shards(job_type: JobType, params: JobParams, shards: list[SealedShard], elapsed_s: float) -> object:
    """The job's ``kernels.jobs.JobOutput`` from every one of its shards (``kernels.shards.merge``)."""
    from kernels.shards import merge

    outputs = [pickle.loads(shard.payload) for shard in shards]
    return merge(job_type, params, outputs, elapsed_s=elapsed_s)
