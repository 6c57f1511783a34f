"""The job-size policy, in one place: which jobs are tiny enough to run packed, and which split into shards.

Each job type's descriptor (``kernels.descriptors``) picks its ``SizeRule``; the gpu-scheduler asks the rule of a
request's type whether to pack it (``runtime.scheduler.packing``, docs/scheduler.md "Packing") and into how many
shards to split it (``kernels.shards.shard_count``). This module imports no kernel, so the scheduler reads it
without numba.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kernels.params import EuropeanOptionParams, NoopParams

# A noop is tiny up to this sleep (seconds): as long as a Dask round trip, a few times over.
PACK_MAX_SLEEP_S: Final = 0.1
# A European option without Greeks is tiny up to this many paths (milliseconds of kernel work, CPU or GPU).
PACK_MAX_PATHS: Final = 100_000
# Most shards one job is split into: each costs a Dask task and a kernel warm-up, and a pool has far fewer
# GPUs; a larger job gets larger shards instead.
MAX_SHARDS: Final = 256


def never_tiny(_: Any) -> bool:
    """The tiny rule of a type whose every job is worth its own Dask task."""
    return False


def short_noop(params: NoopParams) -> bool:
    """A noop sleeping no longer than a few Dask round trips."""
    return params.sleep_s <= PACK_MAX_SLEEP_S


def small_european(params: EuropeanOptionParams) -> bool:
    """A European option of milliseconds of kernel work: few paths and no Greeks (a second pass)."""
    return params.paths <= PACK_MAX_PATHS and not params.greeks


@dataclass(frozen=True)
class SizeRule:
    """How a job type's size decides the way its jobs run: packed with other tiny jobs, split into shards that
    merge exactly, or as one task (the default for both)."""

    tiny: Callable[[Any], bool] = never_tiny
    # The kernel module provides ``ShardedKernelModule`` (``kernels.registry``): its parts merge exactly.
    sharded: bool = False

    def shard_count(self, params: Any, shard_paths: int | None) -> int:
        """How many shards a job of validated ``params`` runs as: 1 (one task) unless the type shards and the
        job is over ``shard_paths`` paths, in shards of at most that many (``MAX_SHARDS`` at most)."""
        if not shard_paths or not self.sharded:
            return 1
        if getattr(params, "greeks", None):
            return 1  # Greeks take a second pass over the same paths: not split (kernels.shards)
        return max(1, min(MAX_SHARDS, -(-params.paths // shard_paths)))
