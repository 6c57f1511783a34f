"""Which kernel module runs each job type, and what a kernel module provides.

``KERNELS`` maps each job type to its descriptor (``kernels.descriptors``), which names its kernel module by
name: the entry points (``kernels.jobs``, ``kernels.shards``) import a module when a job of its type runs, never
when they are imported, so the scheduler process that plans and submits jobs loads no numba and no CUDA. What a module
must provide is stated by the two protocols below (a module satisfies a protocol through its functions);
``tests/kernels/test_registry.py`` checks every entry against them.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Final, Protocol, cast, runtime_checkable

from kernels.context import KernelResult, RunContext
from kernels.descriptors import DESCRIPTORS, descriptor_of
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


# Every job type with a kernel module (noop runs in kernels.jobs itself): its descriptor.
KERNELS: Final = {job_type: descriptor for job_type, descriptor in DESCRIPTORS.items()
                  if descriptor.kernel_module is not None}


def kernel_module(kind: JobType) -> KernelModule:
    """The kernel module of ``kind``, imported now (raises ``KeyError`` for noop, which has none)."""
    name = descriptor_of(kind).kernel_module
    if name is None:
        raise KeyError(f"{kind} jobs run without a kernel module")
    return cast(KernelModule, importlib.import_module(name))


def is_sharded(kind: JobType) -> bool:
    """Whether jobs of ``kind`` can run as shards."""
    descriptor = DESCRIPTORS.get(kind)
    return descriptor is not None and descriptor.kernel_module is not None and descriptor.size.sharded


def sharded_module(kind: JobType) -> ShardedKernelModule:
    """The kernel module of a shardable ``kind``, imported now (raises ``ValueError`` for other types)."""
    if not is_sharded(kind):
        raise ValueError(f"{kind.value} jobs are not sharded")
    return cast(ShardedKernelModule, kernel_module(kind))
