"""One registry names every job type's kernel module, and each module provides what the protocols state."""

from __future__ import annotations

import inspect

import pytest

from kernels.params import JobType
from kernels.registry import KERNELS, KernelModule, ShardedKernelModule, is_sharded, kernel_module, sharded_module

KERNEL_TYPES = [kind for kind in JobType if kind is not JobType.NOOP]


def _members(protocol: type) -> dict[str, list[str]]:
    """The protocol's own functions and their parameter names after ``self``."""
    return {name: list(inspect.signature(member).parameters)[1:] for name, member in vars(protocol).items()
            if inspect.isfunction(member) and not name.startswith("_")}


def _assert_provides(module: object, protocol: type) -> None:
    assert isinstance(module, protocol), f"{module} lacks a member of {protocol.__name__}"
    for name, parameters in _members(protocol).items():
        assert list(inspect.signature(getattr(module, name)).parameters) == parameters, (module, name)


@pytest.mark.parametrize("kind", KERNEL_TYPES, ids=lambda kind: kind.value)
def test_every_job_type_resolves_to_a_module_that_provides_the_protocol(kind: JobType) -> None:
    module = kernel_module(kind)
    _assert_provides(module, KernelModule)
    if is_sharded(kind):
        _assert_provides(sharded_module(kind), ShardedKernelModule)


def test_the_registry_covers_every_type_but_noop_and_says_which_shard() -> None:
    assert set(KERNELS) == set(KERNEL_TYPES)
    assert {kind for kind in JobType if is_sharded(kind)} == {
        JobType.EUROPEAN_OPTION, JobType.ASIAN_OPTION, JobType.PORTFOLIO_VAR}
    assert not is_sharded(JobType.NOOP)
    with pytest.raises(ValueError, match="heston_option jobs are not sharded"):
        sharded_module(JobType.HESTON_OPTION)


def test_a_module_missing_a_member_does_not_satisfy_the_protocol() -> None:
    """The check above can fail: a module without ``merge_parts`` is a kernel module, not a sharded one."""
    import types

    from kernels import european

    partial = types.ModuleType("partial")
    partial.run = european.run  # type: ignore[attr-defined]
    partial.block_count = european.block_count  # type: ignore[attr-defined]
    partial.shard_part = european.shard_part  # type: ignore[attr-defined]
    assert isinstance(partial, KernelModule)
    assert not isinstance(partial, ShardedKernelModule)
