"""Which kernel module runs each job type, and what a kernel module provides.

``KERNELS`` is the one table from job type to kernel module, by module name: the entry points
(``kernels.jobs``, ``kernels.shards``) import a module when a job of its type runs, never when they are
imported, so the scheduler process that plans and submits jobs loads no numba and no CUDA. What a module
must provide is stated by the two protocols below (a module satisfies a protocol through its functions);
``tests/kernels/test_registry.py`` checks every entry against them.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, cast, runtime_checkable

from kernels.context import KernelResult, RunContext
from kernels.params import JobType


@runtime_checkable
class KernelModule(Protocol):
    """A kernel module: ``run`` computes a job from its validated params on ``device`` (``cpu``, ``gpu``)."""

    def run(self, p: Any, device: str, ctx: RunContext) -> KernelResult:
        """The job's result; polls ``ctx`` for cancellation and reports progress through it."""
        ...


@runtime_checkable
class ShardedKernelModule(KernelModule, Protocol):
    """A kernel module whose jobs split by random-stream block range into shards that merge exactly
    (``kernels.shards``)."""

    def block_count(self, p: Any) -> int:
        """Blocks of the job's random streams: the unit a shard is made of."""
        ...

    def shard_part(self, p: Any, device: str, ctx: RunContext, first: int, count: int) -> Any:
        """The mergeable part computed from blocks ``first .. first + count``."""
        ...

    def merge_parts(self, p: Any, parts: Sequence[Any]) -> KernelResult:
        """The job's result from every shard's part, in block order: the same as ``run``'s."""
        ...


@dataclass(frozen=True)
class KernelEntry:
    """Where a job type's kernel lives, and whether its jobs can be sharded."""

    module: str
    sharded: bool = False


# Every job type but noop (which runs in kernels.jobs itself, without a kernel).
KERNELS: Final = {
    JobType.RANDOM_WALK: KernelEntry("kernels.random_walk"),
    # Greeks take a second pass over the same paths: such jobs run as one task (kernels.shards)
    JobType.EUROPEAN_OPTION: KernelEntry("kernels.european", sharded=True),
    JobType.ASIAN_OPTION: KernelEntry("kernels.asian", sharded=True),
    JobType.PORTFOLIO_VAR: KernelEntry("kernels.portfolio_var", sharded=True),
    JobType.HESTON_OPTION: KernelEntry("kernels.heston"),
    JobType.BASKET_OPTION: KernelEntry("kernels.basket_option"),
    JobType.AMERICAN_OPTION: KernelEntry("kernels.lsm"),
    JobType.OPTION_BOOK: KernelEntry("kernels.book"),
}


def kernel_module(kind: JobType) -> KernelModule:
    """The kernel module of ``kind``, imported now (raises ``KeyError`` for noop, which has none)."""
    return cast(KernelModule, importlib.import_module(KERNELS[kind].module))


def is_sharded(kind: JobType) -> bool:
    """Whether jobs of ``kind`` can run as shards."""
    entry = KERNELS.get(kind)
    return entry is not None and entry.sharded


def sharded_module(kind: JobType) -> ShardedKernelModule:
    """The kernel module of a shardable ``kind``, imported now (raises ``ValueError`` for other types)."""
    if not is_sharded(kind):
        raise ValueError(f"{kind.value} jobs are not sharded")
    return cast(ShardedKernelModule, importlib.import_module(KERNELS[kind].module))
